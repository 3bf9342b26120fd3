// A machine as the onprem environment finds one, made of a lab network namespace: SSH reaches it,
// and the bootstrap script runs in it for real without touching this host's /etc, /usr or apt.
// - Its own mount namespace (held by a process in the network namespace, as a lab node's): /etc is an
//   overlay of the host's (the machine's writes land in its own folder), /var/lib and /run are its
//   own, and /usr/local/bin holds the pinned kubeadm, kubelet and kubectl, so the script finds the
//   machine prepared and skips its install step.
// - sshd on its address, root by key only, its host key made here (the test checks it as
//   OnpremCluster's hostKey does).
// - No systemd. The one stand-in for it: containerd started here, as `systemctl start containerd`
//   would on a prepared machine (Debian's containerd, the host's /etc/containerd as the overlay shows it).
// Every process is started and stopped by pid; stop() leaves no process, mount or file.
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, readlinkSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  MOUNT_NAMESPACE_HOLDER,
  enterNode,
  execCommand,
  requireCommand,
  runs,
  startDaemon,
  stopProcess,
  waitUntil,
  type LabNamespace,
} from "@portable-lb/lab";

const BOOTSTRAP_FIX =
  "run scripts/bootstrap.sh (it installs openssh-server and containerd, and builds kubeadm)";

interface Started {
  name: string;
  pid: number;
  marker: string;
  log: string;
}

export interface SshLabMachineSpec {
  ns: LabNamespace;
  /** Its address in `ns`, where sshd listens. */
  address: string;
  /** Its folder (removed by stop()). */
  dir: string;
  /** The public key (one line) that logs in as root. */
  authorizedKey: string;
}

export class SshLabMachine {
  readonly processes: Started[] = [];
  /** Its SSH host key, as ssh-keyscan prints it without the host ("ssh-ed25519 AAAA..."). */
  hostKey = "";

  readonly spec: SshLabMachineSpec;

  private constructor(spec: SshLabMachineSpec) {
    this.spec = spec;
  }

  static async start(spec: SshLabMachineSpec): Promise<SshLabMachine> {
    const machine = new SshLabMachine(spec);
    try {
      await machine.#start();
      return machine;
    } catch (err) {
      await machine.stop();
      throw err;
    }
  }

  /** Where the machine's own changes to its /etc are (the overlay's upper folder). */
  get etcChanges(): string {
    return join(this.spec.dir, "etc-upper");
  }

  /** The machine's /var/lib, as seen from the host. */
  get varLib(): string {
    return join(this.spec.dir, "var-lib");
  }

  async #start(): Promise<void> {
    const { dir, ns, address } = this.spec;
    const sshd = requireCommand("sshd", BOOTSTRAP_FIX);
    const containerd = requireCommand("containerd", BOOTSTRAP_FIX);
    const bin = join(dir, "bin");
    for (const d of [bin, this.etcChanges, join(dir, "etc-work"), this.varLib, join(dir, "logs")])
      mkdirSync(d, { recursive: true });
    // The pinned binaries the tool cache built, where a prepared machine has them on PATH.
    for (const command of ["kubeadm", "kubelet", "kubectl"])
      symlinkSync(requireCommand(command, BOOTSTRAP_FIX), join(bin, command));

    const [holder, ...holderArgs] = MOUNT_NAMESPACE_HOLDER;
    const holderPid = this.#spawn(
      "mount-namespace",
      "nsenter",
      [`--net=/run/netns/${ns.netns}`, "--", holder!, ...holderArgs],
      "sleep infinity",
    );
    const own = readMountNamespace("self");
    if (!(await waitUntil(() => ![undefined, own].includes(readMountNamespace(holderPid)), 5_000, 20)))
      throw new Error(`${ns.netns}: the mount namespace holder (pid ${holderPid}) made none`);
    const mount = async (...args: string[]) => {
      const r = await execCommand("nsenter", [`--mount=/proc/${holderPid}/ns/mnt`, "--", ...args]);
      if (r.code !== 0) throw new Error(`${ns.netns}: '${args.join(" ")}' failed: ${r.stderr.trim()}`);
    };
    // The host's `ip netns` mount would stay the entry for /run/netns under the machine's own /run.
    await execCommand("nsenter", [
      `--mount=/proc/${holderPid}/ns/mnt`,
      "--",
      "umount",
      "--lazy",
      "/run/netns",
    ]);
    await mount("mount", "-t", "tmpfs", "-o", "mode=0755,size=64m", "tmpfs", "/run");
    await mount(
      "mount",
      "-t",
      "overlay",
      "overlay",
      "-o",
      `lowerdir=/etc,upperdir=${this.etcChanges},workdir=${join(dir, "etc-work")}`,
      "/etc",
    );
    await mount("mount", "--bind", this.varLib, "/var/lib");
    await mount("mount", "--bind", bin, "/usr/local/bin");
    await mount("mkdir", "-m", "0755", "/run/sshd");

    execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "", "-f", join(dir, "host_key")]);
    this.hostKey = readFileSync(join(dir, "host_key.pub"), "utf8").trim();
    writeFileSync(join(dir, "authorized_keys"), `${this.spec.authorizedKey.trim()}\n`, { mode: 0o600 });
    const config = join(dir, "sshd_config");
    writeFileSync(
      config,
      [
        `ListenAddress ${address}:22`,
        `HostKey ${join(dir, "host_key")}`,
        `AuthorizedKeysFile ${join(dir, "authorized_keys")}`,
        "PermitRootLogin prohibit-password",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        "PidFile none",
        // The key files are in a test folder, not a home folder sshd would check the modes of.
        "StrictModes no",
        "",
      ].join("\n"),
    );
    const enter = enterNode(ns.netns, holderPid);
    this.#spawn("sshd", enter[0]!, [...enter.slice(1), sshd, "-D", "-e", "-f", config], "sshd");
    // The stand-in for systemd: containerd started as its unit would start it.
    this.#spawn("containerd", enter[0]!, [...enter.slice(1), containerd], "containerd");
    const socket = await waitUntil(
      async () => (await ns.exec("ss", ["-Hltn", "sport = :22"])).stdout.trim() !== "" && this.running(),
      10_000,
      50,
    );
    if (!socket) throw this.#failed("sshd did not listen on port 22 within 10 s");
    const cri = await waitUntil(
      async () =>
        (
          await execCommand("nsenter", [
            `--mount=/proc/${holderPid}/ns/mnt`,
            "--",
            "ctr",
            "--address",
            "/run/containerd/containerd.sock",
            "version",
          ])
        ).code === 0,
      30_000,
      200,
    );
    if (!cri) throw this.#failed("containerd did not answer on /run/containerd/containerd.sock within 30 s");
  }

  /** `marker`: in its command line once nsenter has exec'd it (guards against a recycled pid). */
  #spawn(name: string, command: string, args: string[], marker: string): number {
    const log = join(this.spec.dir, "logs", `${name}.log`);
    const pid = startDaemon({ name, command, args, logFile: log });
    this.processes.push({ name, pid, marker, log });
    return pid;
  }

  #failed(what: string): Error {
    const logs = this.processes.map((p) => `--- ${p.name}:\n${readTail(p.log)}`).join("\n");
    return new Error(`${this.spec.ns.netns}: ${what}\n${logs}`);
  }

  /** Whether sshd and containerd (and the mount namespace's holder) all run. */
  running(): boolean {
    return this.processes.every((p) => runs(p.pid, p.marker));
  }

  /** Stops containerd, sshd and the holder (the mount namespace ends with it), and removes the folder. */
  async stop(): Promise<void> {
    for (const p of [...this.processes].reverse()) await stopProcess(p.pid, p.marker, 10_000);
    rmSync(this.spec.dir, { recursive: true, force: true });
  }
}

function readMountNamespace(pid: number | "self"): string | undefined {
  try {
    return readlinkSync(`/proc/${pid}/ns/mnt`);
  } catch {
    return undefined;
  }
}

function readTail(file: string): string {
  try {
    return readFileSync(file, "utf8").split("\n").slice(-20).join("\n");
  } catch {
    return "(no log)";
  }
}
