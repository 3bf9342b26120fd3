// What a container process runs first, as PID 1 of its own PID namespace and in its own mount
// namespace: a generated sh script that creates missing mountpoints (recorded, see mountpoints.ts),
// bind-mounts the pod's volumes at their mountPaths (read-only where asked), mounts a /proc of its own
// PID namespace, sets the hostname, makes / read-only for readOnlyRootFilesystem, and finally execs
// setpriv, which drops to the container's user and capabilities and execs the command. Pure text
// generation, plus where a command is found (no image is pulled, see resolveCommand).
import { accessSync, constants as fsConstants, statSync } from "node:fs";
import { basename, isAbsolute, join } from "node:path";
import { mountpointChain, registryName } from "./mountpoints.ts";

/** One bind mount into the container. */
export interface MountSpec {
  source: string;
  target: string;
  readOnly: boolean;
  /** The source is a file (a subPath file, a hosts file): the mountpoint is a file too. */
  file: boolean;
}

/** Absolute paths of the host tools the script uses (container env may carry any PATH). */
export interface LaunchTools {
  mount: string;
  mkdir: string;
  flock: string;
  setpriv: string;
}

export interface LaunchSpec {
  tools: LaunchTools;
  /** The machine-wide mountpoint registry (also the lock for creating and removing mountpoints). */
  registryDir: string;
  /** Where a failed set-up step is described for the pod status (reason StartError). */
  errorFile: string;
  mounts: MountSpec[];
  /** Runs as PID 1 of a new PID namespace: mount a /proc that shows only it. */
  ownProc: boolean;
  /** Set in the container's own UTS namespace. */
  hostname: string;
  readOnlyRoot: boolean;
  workingDir?: string;
  setpriv: string[];
  /** The resolved command line. */
  argv: string[];
}

/** Quotes a word for sh. */
export function sq(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

export function launchScript(spec: LaunchSpec): string {
  const t = spec.tools;
  const lines = [
    "#!/bin/sh",
    `fail() { echo "$1" > ${sq(spec.errorFile)}; echo "lab-agent: $1" >&2; exit 128; }`,
  ];
  if (spec.mounts.length) {
    // Held from the first mkdir to the last bind mount, so no other agent's clean-up removes a
    // mountpoint between its creation here and the mount that keeps it in use.
    lines.push(`exec 9<${sq(spec.registryDir)} && ${t.flock} 9 || fail "cannot lock ${spec.registryDir}"`);
    const created = new Set<string>();
    for (const m of spec.mounts) {
      for (const step of mountpointChain(m.target, m.file)) {
        if (created.has(step.path)) continue;
        created.add(step.path);
        const make = step.file ? `: > ${sq(step.path)}` : `${t.mkdir} ${sq(step.path)}`;
        const record = `: > ${sq(join(spec.registryDir, registryName(step.path)))}`;
        lines.push(
          `[ -e ${sq(step.path)} ] || { ${make} && ${record}; } || fail ${sq(`cannot create mountpoint ${step.path}`)}`,
        );
      }
      lines.push(
        `${t.mount} --bind ${sq(m.source)} ${sq(m.target)} || fail ${sq(`cannot mount ${m.target}`)}`,
      );
      if (m.readOnly) {
        lines.push(
          `${t.mount} -o remount,bind,ro ${sq(m.target)} || fail ${sq(`cannot make ${m.target} read-only`)}`,
        );
      }
    }
    lines.push("exec 9<&-");
  }
  if (spec.ownProc) lines.push(`${t.mount} -t proc proc /proc || fail "cannot mount /proc"`);
  lines.push(`echo ${sq(spec.hostname)} > /proc/sys/kernel/hostname || fail "cannot set the hostname"`);
  if (spec.readOnlyRoot) lines.push(`${t.mount} -o remount,bind,ro / || fail "cannot make / read-only"`);
  if (spec.workingDir) {
    lines.push(`cd ${sq(spec.workingDir)} || fail ${sq(`workingDir ${spec.workingDir} does not exist`)}`);
  }
  lines.push(`exec ${t.setpriv} ${[...spec.setpriv, "--", ...spec.argv].map(sq).join(" ")}`);
  return lines.join("\n") + "\n";
}

/** A regular file this process may execute (what resolveCommand looks for). */
export function isExecutable(path: string): boolean {
  try {
    accessSync(path, fsConstants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/** The container mount that hides `path` (the mount replaces what is there on this machine), if any. */
function mountHiding(path: string, mountTargets: string[]): string | undefined {
  return mountTargets.find((t) => path === t || path.startsWith(t.endsWith("/") ? t : `${t}/`));
}

/**
 * Where the container's command is found. No image is pulled, so commands run from this machine:
 * a path inside one of the container's own mounts stays as written (it exists once mounted); an
 * absolute path that exists here is used as is; an absolute path that does not (an image's
 * entrypoint such as /opt/bin/flanneld) is looked up by its basename on the agent's PATH, so locally
 * built tools stand in for the image's; a bare name is looked up on the container's PATH. A file of
 * this machine under one of the container's mounts is not visible to it, so it is skipped, and a
 * miss names it (a checkout under /tmp, say, is hidden by a pod's /tmp emptyDir).
 */
export function resolveCommand(
  argv0: string,
  opts: {
    containerPath: string;
    agentPath: string;
    mountTargets: string[];
    isExecutable: (path: string) => boolean;
  },
): { path: string } | { error: string } {
  const hidden: string[] = [];
  const search = (name: string, pathVar: string) => {
    for (const dir of pathVar.split(":").filter((d) => d !== "")) {
      const candidate = join(dir, name);
      if (!opts.isExecutable(candidate)) continue;
      const mount = mountHiding(candidate, opts.mountTargets);
      if (mount === undefined) return candidate;
      hidden.push(`${candidate} is hidden by the container's mount at ${mount}`);
    }
    return undefined;
  };
  const found = (() => {
    if (!argv0.includes("/")) return search(argv0, opts.containerPath);
    if (!isAbsolute(argv0) || mountHiding(argv0, opts.mountTargets) !== undefined) return argv0;
    if (opts.isExecutable(argv0)) return argv0;
    return search(basename(argv0), opts.agentPath);
  })();
  if (found !== undefined) return { path: found };
  const where = argv0.includes("/") ? `"${basename(argv0)}" on the agent's PATH` : "the container's PATH";
  const why = hidden.length > 0 ? `: ${hidden.join("; ")} (move it out of there)` : "";
  return { error: `exec: "${argv0}": executable file not found in ${where}${why}` };
}
