// The LB image as built (`npm run image`, which `npm test`'s bootstrap runs): its archive unpacked
// and its processes run under runc as the rendered pod specs say (user, only the listed
// capabilities, no_new_privs, read-only root, the volumes), in a network namespace of the test's:
// the controller against the test run's API server, the speaker running BIRD on the config the
// controller rendered, the speaker's probe and preStop, the node agent; then the image pushed to a
// registry on the namespace's loopback and imported into a containerd of the test's.
// lb-image/src/image.test.ts checks the build definition.
import { setTimeout as sleep } from "node:timers/promises";
import { CoreV1Api, type V1Container, type V1PodSpec } from "@kubernetes/client-node";
import { LB_COMMANDS, LB_PATHS, lbConfigSchema } from "@portable-lb/core/config";
import { NFT_TABLE } from "../../lb-image/src/dataplane/nft/nftState.ts";
import { execFileSync } from "node:child_process";
import {
  chmodSync,
  existsSync,
  globSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { lbPodSpec } from "../../packages/core/src/loadBalancer/podSpec.ts";
import { nodeAgentPodSpec } from "../../packages/core/src/loadBalancer/nodeAgent.ts";
import { execCommand, NetnsLab, type LabNamespace } from "@portable-lb/lab";
import { waitUntil } from "@portable-lb/lab";
import { ApiBridge } from "../harness/netns/apiBridge.ts";
import { LOADER_COMM } from "../harness/netns/fastPathFlows.ts";
import { builtImage, type BuiltImage } from "../harness/oci/lbImageRootfs.ts";
import { unpackOciArchive, type UnpackedImage } from "../harness/oci/ociArchive.ts";
import { RuncContainer, type RuncContainerOptions } from "../harness/oci/runcContainer.ts";
import { TestContainerd } from "../harness/oci/testContainerd.ts";
import { repoRoot } from "../harness/repoRoot.ts";
import { createLbService } from "../harness/lbServices.ts";
import { testKubeConfig, testKubeconfig } from "../harness/testEnv.ts";
import { CAP, capMask } from "../harness/capabilities.ts";

const POD_IP = "10.244.1.10";
const HOST_IP = "10.0.0.1";
// A class and namespace of its own: integration tests share one API server.
const NS = `lbimage-${process.pid}`;
const VIP = "10.1.3.1";
const config = lbConfigSchema.parse({
  loadBalancerClass: "portable-lb.io/lbimage",
  routingMode: "bgp",
  podCidr: "10.244.0.0/16",
  vipPools: [{ name: "web", cidr: "10.1.3.0/24", avoidBuggyIps: true }],
  bgp: { asn: 64512, routeReflectors: ["10.0.0.5"] },
  // DSR: its tunnels are made and read back by the image's own `ip`, which prints what the host's
  // does not (no /etc/protocols in the image).
  dataPlane: { engine: "nftables", mode: "dsr" },
});
const lbSpec = lbPodSpec({
  config,
  image: "lb",
  serviceAccountName: "lb",
  priorityClassName: "p",
  nodeSelector: {},
  configMapName: "lb",
}) as V1PodSpec;
const container = (spec: V1PodSpec, name: string): V1Container =>
  spec.containers.find((c) => c.name === name)!;

const core = testKubeConfig().makeApiClient(CoreV1Api);

let built: BuiltImage;
let image: UnpackedImage;
let imageDir: string | undefined;
let lab: NetnsLab;
let ns: LabNamespace;
let api: ApiBridge;
const started: RuncContainer[] = [];

/** Runs one container of `spec` from the image in the test's namespace; the pod's volumes are folders of the lab. */
async function run(spec: V1PodSpec, name: string, volumes: Record<string, string>): Promise<RuncContainer> {
  const id = `plb-${lab.id}-${name}`;
  const o: RuncContainerOptions = {
    id,
    container: container(spec, name),
    image,
    netnsPath: `/run/netns/${ns.netns}`,
    hostname: "lb-pod",
    volumes,
    fields: {
      "spec.nodeName": "node-1",
      "metadata.name": "lb-pod",
      "metadata.namespace": NS,
      "metadata.uid": "00000000-0000-0000-0000-000000000001",
      "status.podIP": POD_IP,
      "status.hostIP": HOST_IP,
    },
    // A cluster's admission adds the ServiceAccount's token volume; here a kubeconfig stands for it.
    env: { KUBECONFIG: "/var/run/portable-lb-test/kubeconfig" },
    files: { [api.kubeconfigFile]: "/var/run/portable-lb-test/kubeconfig" },
  };
  const c = await RuncContainer.start(o, image.rootfs, join(lab.dir, name));
  started.push(c);
  return c;
}

/** A folder standing for an emptyDir or a projected volume. */
function volume(name: string, files: Record<string, string> = {}): string {
  const dir = join(lab.dir, "volumes", name);
  mkdirSync(dir, { recursive: true });
  for (const [file, text] of Object.entries(files)) writeFileSync(join(dir, file), text);
  return dir;
}

/** An HTTP GET from inside the namespace: status code and body. */
async function get(port: number, path: string): Promise<{ code: string; body: string }> {
  const r = await ns.exec("curl", [
    "-s",
    "-m",
    "5",
    "-w",
    "\n%{http_code}",
    `http://127.0.0.1:${port}${path}`,
  ]);
  const lines = r.stdout.split("\n");
  return { code: lines.pop() ?? "", body: lines.join("\n") };
}

/** The capability, uid and no_new_privs lines of a process. */
function processStatus(pid: number): { uid: string; capEff: string; capBnd: string; noNewPrivs: string } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const field = (name: string) => new RegExp(`^${name}:\\s+(.*)$`, "m").exec(status)?.[1] ?? "";
  return {
    uid: field("Uid").split(/\s+/)[1]!,
    capEff: field("CapEff"),
    capBnd: field("CapBnd"),
    noNewPrivs: field("NoNewPrivs"),
  };
}
const { NET_BIND_SERVICE: CAP_NET_BIND_SERVICE, NET_ADMIN: CAP_NET_ADMIN, BPF: CAP_BPF } = CAP;

beforeAll(async () => {
  built = builtImage();
  lab = await NetnsLab.create("lb-image");
  ns = await lab.namespace("pod");
  // The pod's uplink as a CNI makes it (eth0 with the pod's address, the default route through its
  // node), where the DSR fast path attaches, and the pod spec's sysctls, which the runtime sets in
  // the sandbox.
  const node = await lab.namespace("node");
  await lab.link(ns, node, { a: `${POD_IP}/24`, b: "10.244.1.1/24", names: { a: "eth0", b: "veth-pod" } });
  await ns.defaultRoute("10.244.1.1");
  for (const s of lbSpec.securityContext?.sysctls ?? []) await ns.sysctl(s.name, s.value);
  api = await ApiBridge.open(ns, testKubeconfig());
  await core.createNamespace({ body: { metadata: { name: NS } } });
  chmodSync(api.kubeconfigFile, 0o600);
  // Beside the lab, not in it: a kept lab folder (PORTABLE_LB_KEEP_LAB_LOGS) holds logs, not 350 MB.
  imageDir = mkdtempSync(join(tmpdir(), "plb-lb-image-"));
  image = await unpackOciArchive(built.archive, imageDir);
}, 180_000);

afterAll(async () => {
  for (const c of started.reverse()) await c.remove();
  await api?.close();
  await core.deleteNamespace({ name: NS }).catch(() => undefined);
  await lab?.destroy();
  if (imageDir) rmSync(imageDir, { recursive: true, force: true });
}, 60_000);

describe("the LB image archive", () => {
  it("is the image build.sh recorded: its digest and name, one layer, the bird user, the controller's command", () => {
    expect(image.digest).toBe(built.digest);
    expect(image.refName).toBe(built.ref);
    expect(image.layers).toBe(1);
    expect(image.config.User).toBe("179:179");
    expect(image.config.Cmd).toEqual([LB_COMMANDS.controller, "--config", LB_PATHS.configFile]);
    expect(readFileSync(join(image.rootfs, "etc/passwd"), "utf8")).toMatch(/^bird:x:179:179:/m);
  });

  it("links every LB command to its launcher, and has no Pulumi SDK", () => {
    for (const command of Object.values(LB_COMMANDS)) {
      const link = readlinkSync(join(image.rootfs, "usr/local/bin", command));
      expect(existsSync(join(image.rootfs, link))).toBe(true);
    }
    expect(existsSync(join(image.rootfs, "opt/portable-lb/node_modules/@pulumi"))).toBe(false);
  });

  it("finds every library its binaries link (Node, our BIRD, ip, nft, ipvsadm)", () => {
    const binaries = ["usr/local/bin/node", "usr/sbin/bird", "usr/sbin/birdc", "usr/sbin/ipvsadm"];
    binaries.push("usr/sbin/nft", "bin/ip");
    for (const b of binaries) {
      const ldd = execFileSync("chroot", [image.rootfs, "/usr/bin/ldd", `/${b}`], { encoding: "utf8" });
      expect({ b, missing: ldd.split("\n").filter((l) => l.includes("not found")) }).toEqual({
        b,
        missing: [],
      });
    }
  });

  it("carries its SBOM: the dpkg database's packages and the node_modules' packages, as beside the archive", () => {
    const inImage = readFileSync(join(image.rootfs, built.sbomInImage), "utf8");
    expect(inImage).toBe(readFileSync(built.sbom, "utf8"));
    const sbom = JSON.parse(inImage) as {
      spdxVersion: string;
      packages: { name: string; versionInfo: string; externalRefs: { referenceLocator: string }[] }[];
    };
    expect(sbom.spdxVersion).toBe("SPDX-2.3");
    const purls = sbom.packages.map((p) => p.externalRefs[0]!.referenceLocator);
    const dpkg = execFileSync(
      "dpkg-query",
      [`--admindir=${join(image.rootfs, "var/lib/dpkg")}`, "-W", "-f", "${Package} ${Version}\\n"],
      { encoding: "utf8" },
    )
      .trim()
      .split("\n")
      .map((l) => l.split(" "));
    expect(dpkg.length).toBeGreaterThan(50);
    const debs = sbom.packages.filter((p) => p.externalRefs[0]!.referenceLocator.startsWith("pkg:deb/"));
    expect(debs.map((p) => `${p.name} ${p.versionInfo}`).sort()).toEqual(dpkg.map((d) => d.join(" ")).sort());
    for (const npm of ["pino", "zod", "prom-client", "ipaddr.js"])
      expect(purls.join("\n")).toContain(`pkg:npm/${npm}@`);
    expect(purls.join("\n")).toContain("pkg:npm/%40kubernetes/client-node@");
    expect(purls.filter((p) => p.includes("pulumi"))).toEqual([]);
  });
});

describe("the LB image under runc, as the pod specs say", () => {
  const birdRun = () => volume("bird-run");

  it("runs the controller (NET_ADMIN, BPF) and the speaker's BIRD (NET_BIND_SERVICE only) on the config the controller renders", async () => {
    const volumes = {
      config: volume("config", { "config.json": JSON.stringify(config) }),
      tmp: volume("tmp"),
      "bird-run": birdRun(),
    };
    const controller = await run(lbSpec, "controller", volumes);
    const health = config.ports.health;
    expect(await waitUntil(async () => (await get(health, "/healthz")).code === "200", 30_000, 250)).toBe(
      true,
    );
    // It serves a Service of its class: allocates the VIP through the API and programs it into
    // the pod's nftables (NET_ADMIN in the pod's network namespace).
    await createLbService(testKubeConfig(), NS, "web", config.loadBalancerClass, [{ ip: "10.244.0.11" }], {
      port: 8080,
    });
    const vip = async () =>
      (await core.readNamespacedServiceStatus({ name: "web", namespace: NS })).status?.loadBalancer
        ?.ingress?.[0]?.ip;
    expect(await waitUntil(async () => (await vip()) === VIP, 30_000, 250)).toBe(true);
    const programmed = async () =>
      (await ns.exec("nft", ["list", "table", "ip", NFT_TABLE])).stdout.includes(VIP);
    expect(await waitUntil(programmed, 30_000, 250)).toBe(true);
    expect((await get(config.ports.metrics, "/metrics")).body).toContain("portable_lb_");
    // The backend's tunnel is in place, and what the controller reads back of it stays as it made
    // it: no drift found over several cheap checks (each runs every ~0.5 s).
    const tunnelRules = async () => (await ns.exec("ip", ["rule", "show"])).stdout;
    expect(await waitUntil(async () => /dport 4789 goto 32000/.test(await tunnelRules()), 30_000, 250)).toBe(
      true,
    );
    const driftFound = async () =>
      (await get(config.ports.metrics, "/metrics")).body
        .split("\n")
        .filter((l) => l.startsWith("portable_lb_drift_found_total"))
        .reduce((n, l) => n + Number(l.split(" ").pop()), 0);
    const before = await driftFound();
    await sleep(4_000);
    expect(await driftFound()).toBe(before);
    expect(await waitUntil(() => existsSync(join(volumes["bird-run"], "bird.conf")), 30_000, 250)).toBe(true);

    const speaker = await run(lbSpec, "bgp-speaker", volumes);
    const probe = container(lbSpec, "bgp-speaker").livenessProbe!.exec!.command!;
    expect(
      await waitUntil(
        async () => (await speaker.exec(probe)).stdout.includes("Daemon is up and running"),
        30_000,
        250,
      ),
    ).toBe(true);
    // BIRD's parser accepts the rendered config inside the image, as the speaker checked before starting.
    expect((await speaker.exec(["bird", "-p", "-c", `${LB_PATHS.birdRunDir}/bird.conf`])).code).toBe(0);

    // Each process holds exactly its container's capabilities, as uid 0 with no_new_privs.
    const comm = (pid: number) => readFileSync(`/proc/${pid}/comm`, "utf8").trim();
    const birdPid = (await speaker.pids()).find((p) => comm(p) === "bird");
    expect(birdPid).toBeDefined();
    const pids = await controller.pids();
    const nodePid = pids[0]!;
    // The DSR fast path's loader runs beside it, with the same two capabilities, its program attached.
    const loaderPid = pids.find((p) => comm(p) === LOADER_COMM);
    expect(loaderPid).toBeDefined();
    expect(processStatus(loaderPid!)).toEqual({
      uid: "0",
      capEff: capMask(CAP_NET_ADMIN, CAP_BPF),
      capBnd: capMask(CAP_NET_ADMIN, CAP_BPF),
      noNewPrivs: "1",
    });
    expect((await get(config.ports.metrics, "/metrics")).body).toMatch(/^portable_lb_fast_path_up 1$/m);
    expect(processStatus(birdPid!)).toEqual({
      uid: "0",
      capEff: capMask(CAP_NET_BIND_SERVICE),
      capBnd: capMask(CAP_NET_BIND_SERVICE),
      noNewPrivs: "1",
    });
    expect(processStatus(nodePid)).toEqual({
      uid: "0",
      capEff: capMask(CAP_NET_ADMIN, CAP_BPF),
      capBnd: capMask(CAP_NET_ADMIN, CAP_BPF),
      noNewPrivs: "1",
    });
    // Read-only root: only the volumes take writes.
    const write = await speaker.exec(["touch", "/opt/portable-lb/probe"]);
    expect({ code: write.code, stderr: write.stderr }).toEqual({
      code: 1,
      stderr: expect.stringContaining("Read-only file system"),
    });

    // The speaker's preStop: the controller withdraws, the hook exits 0.
    const preStop = container(lbSpec, "bgp-speaker").lifecycle!.preStop!.exec!.command!;
    const withdraw = await speaker.exec(preStop, 40_000);
    expect({ code: withdraw.code, stderr: withdraw.stderr.slice(-500) }).toEqual({
      code: 0,
      stderr: expect.any(String),
    });
  }, 180_000);

  it("runs the node agent (host network, NET_ADMIN only) and it answers on its port", async () => {
    const spec = nodeAgentPodSpec({
      namespace: "portable-lb-system",
      config,
      configMapName: "lb",
      podAnnotations: {},
      image: "lb",
      nodeSelector: {},
      priorityClassName: "p",
    }) as V1PodSpec;
    const agentContainer = spec.containers[0]!;
    const volumes = Object.fromEntries(
      (agentContainer.volumeMounts ?? []).map((m) => [
        m.name,
        m.name === "config"
          ? volume("agent-config", { "config.json": JSON.stringify(config) })
          : volume(`agent-${m.name}`),
      ]),
    );
    const agent = await run(spec, agentContainer.name, volumes);
    expect(
      await waitUntil(
        async () => (await get(config.ports.nodeAgent, "/healthz")).code === "200",
        30_000,
        250,
      ),
    ).toBe(true);
    expect(processStatus((await agent.pids())[0]!)).toMatchObject({
      uid: "0",
      capEff: capMask(CAP_NET_ADMIN),
      noNewPrivs: "1",
    });
  }, 120_000);
});

describe("npm run image -- --push", () => {
  it("pushes the image to a registry with its digest unchanged", async () => {
    const cache = process.env.PORTABLE_LB_CACHE ?? join(homedir(), ".cache/portable-lb");
    const registry = globSync(join(cache, "tools/docker-registry-*/bin/docker-registry"))[0];
    expect(registry).toBeDefined();
    const dir = volume("registry");
    writeFileSync(
      join(dir, "config.yml"),
      `version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: ${dir}/data\nhttp:\n  addr: 127.0.0.1:5000\n`,
    );
    await ns.spawn("registry", registry!, ["serve", join(dir, "config.yml")], { waitForPort: 5000 });
    const ref = "127.0.0.1:5000/portable-lb/lb:test";
    const push = await ns.exec(
      "bash",
      [join(repoRoot(), "lb-image/image/build.sh"), "--push", ref, "--insecure-registry"],
      {
        timeoutMs: 120_000,
      },
    );
    expect({ code: push.code, stderr: push.code === 0 ? "" : push.stderr }).toEqual({ code: 0, stderr: "" });
    const inspect = await ns.run("skopeo", ["inspect", "--tls-verify=false", `docker://${ref}`]);
    expect((JSON.parse(inspect) as { Digest: string }).Digest).toBe(built.digest);
  }, 180_000);
});

describe("npm run image -- --load", () => {
  it("imports the image into a containerd under its name, digest unchanged", async () => {
    const containerd = await TestContainerd.start(ns, join(imageDir!, "containerd"), "plb-test");
    try {
      const load = await execCommand(
        "bash",
        [
          join(repoRoot(), "lb-image/image/build.sh"),
          "--load",
          `${containerd.socket},${containerd.namespace}`,
        ],
        { timeoutMs: 120_000 },
      );
      expect({ code: load.code, stderr: load.code === 0 ? "" : load.stderr }).toEqual({
        code: 0,
        stderr: "",
      });
      const images = await containerd.ctr(["images", "ls"]);
      const row = images.stdout.split("\n").find((l) => l.startsWith(`${built.ref} `));
      expect(row?.split(/\s+/)[2]).toBe(built.digest);
    } finally {
      await containerd.stop();
    }
  }, 180_000);
});
