// The onprem environment's resource graph under Pulumi's mocks: per machine one SSH command that
// copies the shared bootstrap script and one that runs it, the control plane's before any join,
// the private key and the scripts kept secret, and what the environment hands PortableCluster.
import * as pulumi from "@pulumi/pulumi";
import {
  installMocks,
  registered,
  secretValue,
  typeChain,
  valueOf,
} from "../../../../test/unit/pulumiMocks.ts";
import { cloudOutputs } from "../__fixtures__/cloudMocks.ts";
import { TEST_CA_KEY, testCredentialsScript } from "../bootstrap/__fixtures__/testCredentials.ts";
import { onpremEnvironmentSchema } from "../onpremEnvironment.ts";
import { COPY_SCRIPT, OnpremCluster, RUN_SCRIPT } from "./onpremCluster.ts";

const recorded = installMocks({ outputs: (type, _name, inputs) => cloudOutputs(type, inputs) });

const network = { nodeCidr: "10.20.0.0/24", podCidr: "10.244.0.0/16", serviceCidr: "10.96.0.0/16" };
const PRIVATE_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\ntest\n-----END OPENSSH PRIVATE KEY-----\n";
const HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ";
const environment = (extra: Record<string, unknown> = {}) =>
  onpremEnvironmentSchema.parse({
    kind: "onprem",
    nodes: [
      { name: "cp", host: "cp.example.internal", address: "10.20.0.10", role: "control-plane" },
      { name: "lb-1", host: "10.20.0.11", address: "10.20.0.11", role: "lb", hostKey: HOST_KEY },
      { name: "lb-2", host: "10.20.0.12", address: "10.20.0.12", role: "lb" },
      { name: "worker-1", host: "10.20.0.13", address: "10.20.0.13", role: "worker" },
    ],
    ssh: { user: "admin", port: 2222 },
    ...extra,
  });

type Inputs = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- resource inputs
const commands = () => recorded.filter((r) => r.type === "command:remote:Command");
const command = (name: string) => commands().find((c) => c.name === name)!.inputs as Inputs;

/** Every registration's explicit dependencies, as the SDK passes its options on (old-style transformation). */
const dependsOn = new Map<pulumi.Resource, pulumi.Resource[]>();
const recordDependsOn: pulumi.ResourceTransformation = ({ resource, opts }) => {
  dependsOn.set(resource, [opts.dependsOn ?? []].flat() as pulumi.Resource[]);
  return undefined;
};

const build = (extra: Record<string, unknown> = {}) => {
  dependsOn.clear();
  return registered(
    recorded,
    () =>
      new OnpremCluster(
        "plb",
        { environment: environment(extra), network, privateKey: PRIVATE_KEY },
        { transformations: [recordDependsOn] },
      ),
  );
};

describe("OnpremCluster", () => {
  let cluster: OnpremCluster;
  beforeAll(async () => {
    cluster = await build();
  });

  it("copies and runs a script on every machine, over SSH as the environment says", () => {
    // (Registration order is the runtime's: the order that matters is the dependencies' below.)
    expect(
      commands()
        .map((c) => c.name)
        .sort(),
    ).toEqual(
      ["cp", "lb-1", "lb-2", "worker-1"].flatMap((n) => [`plb-${n}-bootstrap`, `plb-${n}-copy`]).sort(),
    );
    for (const machine of environment().nodes) {
      for (const step of ["copy", "bootstrap"]) {
        // A secret as a whole: it holds the private key.
        const connection = secretValue(command(`plb-${machine.name}-${step}`).connection) as Inputs;
        expect(connection).toMatchObject({ host: machine.host, port: 2222, user: "admin" });
        expect(connection.privateKey).toBe(PRIVATE_KEY);
        // The host key is checked where the environment gives one.
        expect(connection.hostKey).toBe(machine.hostKey);
      }
      expect(command(`plb-${machine.name}-copy`).create).toBe(COPY_SCRIPT);
      expect(command(`plb-${machine.name}-bootstrap`).create).toBe(RUN_SCRIPT);
    }
    expect(COPY_SCRIPT).toBe(
      "install -d -m 0700 /var/lib/portable-lb && install -m 0700 /dev/stdin /var/lib/portable-lb/bootstrap.sh",
    );
    expect(RUN_SCRIPT).toBe("bash /var/lib/portable-lb/bootstrap.sh");
  });

  it("copies the shared renderer's script, a secret, and runs it again when it changes", () => {
    for (const node of cluster.environment.nodes) {
      const copy = command(`plb-${node.name}-copy`);
      const script = testCredentialsScript(node, {
        controlPlaneAddress: "10.20.0.10",
        apiServerCertSans: ["10.20.0.10"],
        network,
      });
      expect(secretValue(copy.stdin)).toBe(script);
      // No cloud instance to name on premises.
      expect(script).not.toContain("provider-id");
      for (const step of ["copy", "bootstrap"])
        expect(secretValue(command(`plb-${node.name}-${step}`).triggers)).toEqual([script]);
    }
  });

  it("runs the control plane's script before any join, and each script after its copy", () => {
    const { copies, bootstraps } = cluster;
    expect(dependsOn.get(bootstraps["cp"]!)).toEqual([copies["cp"]]);
    expect(dependsOn.get(copies["cp"]!)).toEqual([]);
    for (const name of ["lb-1", "lb-2", "worker-1"]) {
      expect(dependsOn.get(bootstraps[name]!)).toEqual([copies[name], bootstraps["cp"]]);
      // Copies need nothing but the machine: they run while the control plane boots.
      expect(dependsOn.get(copies[name]!)).toEqual([]);
    }
  });

  it("hands PortableCluster the kubeconfig (a secret), the nodes, and waits for every node", async () => {
    const env = cluster.environment;
    expect(env).toMatchObject({
      kind: "onprem",
      platform: "onprem",
      lbNodeCount: 2,
      defaultForwarding: "dsr",
    });
    expect(env.bgp).toBeUndefined();
    expect(env.nodes.map((n) => [n.name, n.role, n.address])).toEqual([
      ["cp", "control-plane", "10.20.0.10"],
      ["lb-1", "lb", "10.20.0.11"],
      ["lb-2", "lb", "10.20.0.12"],
      ["worker-1", "worker", "10.20.0.13"],
    ]);
    expect(await pulumi.isSecret(env.kubeconfig)).toBe(true);
    const kubeconfig = await valueOf(env.kubeconfig);
    expect(kubeconfig).toContain("server: https://10.20.0.10:6443");
    expect(kubeconfig).toContain(`client-key-data: ${Buffer.from(TEST_CA_KEY).toString("base64")}`);
    expect(env.dependsOn).toEqual(Object.values(cluster.bootstraps));
    expect(await typeChain(cluster.bootstraps["cp"]!)).toBe(
      "portable-lb:providers:OnpremCluster$command:remote:Command",
    );
    expect(await typeChain(cluster.credentials)).toBe(
      "portable-lb:providers:OnpremCluster$portable-lb:providers:ClusterCredentials",
    );
  });

  it("hands over the environment's BGP routers, and lets LB nodes be tainted", async () => {
    const tainted = await build({ bgp: { routers: ["10.20.0.1", "10.20.0.2"] }, lbTaint: true });
    expect(tainted.environment.bgp).toEqual({ routers: ["10.20.0.1", "10.20.0.2"] });
    // Its one worker runs the route reflector unless the user names others.
    expect(tainted.environment.defaultRouteReflectors).toEqual([{ node: "worker-1", address: "10.20.0.13" }]);
    expect(secretValue(command("plb-lb-1-copy").stdin)).toContain("effect: NoSchedule");
    expect(secretValue(command("plb-worker-1-copy").stdin)).not.toContain("effect: NoSchedule");
  });

  it("renders every machine's script with the site's machine settings", async () => {
    const machines = {
      imageRepository: "registry.example.net/k8s",
      cgroupV1: true,
      kubeadmPatches: "/etc/kp",
    };
    const site = await build({ machines });
    for (const node of site.environment.nodes)
      expect(secretValue(command(`plb-${node.name}-copy`).stdin)).toBe(
        testCredentialsScript(node, {
          controlPlaneAddress: "10.20.0.10",
          apiServerCertSans: ["10.20.0.10"],
          network,
          machines,
        }),
      );
    expect(secretValue(command("plb-cp-copy").stdin)).toContain("imageRepository: registry.example.net/k8s");
    expect(secretValue(command("plb-lb-2-copy").stdin)).toContain(
      "ignorePreflightErrors: [SystemVerification]",
    );
  });

  it("refuses a machine outside the node network before registering anything", () => {
    recorded.length = 0;
    const env = environment();
    env.nodes[3]!.address = "10.30.0.13";
    expect(() => new OnpremCluster("bad", { environment: env, network, privateKey: PRIVATE_KEY })).toThrow(
      'environment.nodes[3].address: is outside network.nodeCidr 10.20.0.0/24; use the node\'s address on the node network (got "10.30.0.13")',
    );
    expect(recorded).toEqual([]);
  });
});
