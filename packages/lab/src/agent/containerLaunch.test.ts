import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { launchScript, resolveCommand, sq, type LaunchSpec } from "./containerLaunch.ts";

const tools = {
  mount: "/usr/bin/mount",
  mkdir: "/bin/mkdir",
  flock: "/usr/bin/flock",
  setpriv: "/usr/bin/setpriv",
};
const spec = (o: Partial<LaunchSpec> = {}): LaunchSpec => ({
  tools,
  registryDir: "/run/reg",
  errorFile: "/s/c.error",
  mounts: [],
  ownProc: true,
  hostname: "web-1",
  readOnlyRoot: false,
  setpriv: ["--reuid", "0"],
  argv: ["/usr/bin/node", "server.js", "it's"],
  ...o,
});

describe("launchScript", () => {
  it("quotes every word for sh", () => {
    expect(sq("it's")).toBe(`'it'\\''s'`);
    const r = spawnSync("sh", ["-c", `printf '%s|' ${["a b", "it's", "$(x)", "\\n"].map(sq).join(" ")}`], {
      encoding: "utf8",
    });
    expect(r.stdout).toBe("a b|it's|$(x)|\\n|");
  });

  it("without mounts: its own /proc, the hostname, then exec setpriv with the command", () => {
    const s = launchScript(spec());
    expect(s).not.toContain("flock");
    expect(s).toContain("/usr/bin/mount -t proc proc /proc");
    expect(s).toContain("echo 'web-1' > /proc/sys/kernel/hostname");
    expect(s.trimEnd().split("\n").at(-1)).toBe(
      `exec /usr/bin/setpriv '--reuid' '0' '--' '/usr/bin/node' 'server.js' 'it'\\''s'`,
    );
    expect(spawnSync("sh", ["-n", "-c", s]).status).toBe(0);
  });

  it("creates missing mountpoints under the registry lock, records each, bind-mounts read-only where asked", () => {
    const s = launchScript(
      spec({
        mounts: [
          {
            source: "/s/volumes/token",
            target: "/var/run/secrets/kubernetes.io/serviceaccount",
            readOnly: true,
            file: false,
          },
          { source: "/s/c.termination-log", target: "/dev/termination-log", readOnly: false, file: true },
        ],
        readOnlyRoot: true,
        workingDir: "/srv",
        ownProc: false,
      }),
    );
    const lines = s.split("\n");
    const at = (needle: string) => lines.findIndex((l) => l.includes(needle));
    expect(at("/usr/bin/flock 9")).toBeLessThan(at("mkdir '/var/run/secrets'"));
    expect(s).toContain(
      `[ -e '/var/run/secrets/kubernetes.io' ] || { /bin/mkdir '/var/run/secrets/kubernetes.io' && : > '/run/reg/%2Fvar%2Frun%2Fsecrets%2Fkubernetes.io'; }`,
    );
    expect(s).toContain(
      `[ -e '/dev/termination-log' ] || { : > '/dev/termination-log' && : > '/run/reg/%2Fdev%2Ftermination-log'; }`,
    );
    expect(s).toContain("/usr/bin/mount -o remount,bind,ro '/var/run/secrets/kubernetes.io/serviceaccount'");
    expect(s).not.toContain("remount,bind,ro '/dev/termination-log'");
    expect(at("exec 9<&-")).toBeGreaterThan(at("--bind '/s/c.termination-log'"));
    expect(at("remount,bind,ro /")).toBeGreaterThan(at("exec 9<&-"));
    expect(s).toContain("cd '/srv' ||");
    expect(s).not.toContain("-t proc");
    expect(spawnSync("sh", ["-n", "-c", s]).status).toBe(0);
  });

  it("records a failed step for the status and exits 128", () => {
    const dir = mkdtempSync(join(tmpdir(), "plb-launch-"));
    try {
      const errorFile = join(dir, "c.error");
      const script = launchScript(spec({ workingDir: "/does/not/exist", errorFile, ownProc: false }));
      // In a UTS namespace of its own: the script sets the hostname before it fails.
      const r = spawnSync("unshare", ["--uts", "sh", "-c", script], { encoding: "utf8" });
      expect(r.status).toBe(128);
      expect(readFileSync(errorFile, "utf8")).toBe("workingDir /does/not/exist does not exist\n");
      expect(r.stderr).toContain("lab-agent: workingDir /does/not/exist does not exist");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("resolveCommand", () => {
  const existing = new Set([
    "/usr/bin/node",
    "/opt/lab/bin/flanneld",
    "/usr/local/bin/portable-lb-controller",
    "/tmp/checkout/bin/portable-lb-speaker",
  ]);
  const opts = {
    containerPath: "/usr/local/bin:/usr/bin:/tmp/checkout/bin",
    agentPath: "/opt/lab/bin:/usr/bin",
    mountTargets: ["/scripts", "/tmp"],
    isExecutable: (p: string) => existing.has(p),
  };

  it("keeps absolute paths that exist here or inside the container's own mounts", () => {
    expect(resolveCommand("/usr/bin/node", opts)).toEqual({ path: "/usr/bin/node" });
    expect(resolveCommand("/scripts/run.sh", opts)).toEqual({ path: "/scripts/run.sh" });
  });

  it("finds an image's missing entrypoint by its basename on the agent's PATH", () => {
    expect(resolveCommand("/opt/bin/flanneld", opts)).toEqual({ path: "/opt/lab/bin/flanneld" });
    expect(resolveCommand("/opt/bin/missing", opts)).toEqual({
      error: 'exec: "/opt/bin/missing": executable file not found in "missing" on the agent\'s PATH',
    });
  });

  it("looks bare names up on the container's PATH", () => {
    expect(resolveCommand("portable-lb-controller", opts)).toEqual({
      path: "/usr/local/bin/portable-lb-controller",
    });
    expect(resolveCommand("flanneld", opts)).toEqual({
      error: 'exec: "flanneld": executable file not found in the container\'s PATH',
    });
  });

  it("skips a file of this machine that a container mount hides, and says so when nothing else is found", () => {
    expect(resolveCommand("portable-lb-speaker", opts)).toEqual({
      error:
        'exec: "portable-lb-speaker": executable file not found in the container\'s PATH: ' +
        "/tmp/checkout/bin/portable-lb-speaker is hidden by the container's mount at /tmp (move it out of there)",
    });
    expect(resolveCommand("portable-lb-speaker", { ...opts, mountTargets: ["/scripts"] })).toEqual({
      path: "/tmp/checkout/bin/portable-lb-speaker",
    });
  });
});
