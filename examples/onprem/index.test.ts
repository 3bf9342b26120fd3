// The onprem example's preview under Pulumi's mocks, as `pulumi preview` runs it: its stack config
// parsed, every machine's SSH port probed (loopback listeners stand in for the machines' sshd), the
// SSH commands of OnpremCluster and PortableCluster on the kubeconfig it made. A machine whose port
// does not answer fails the preview, named, before anything registers.
import { createServer, type AddressInfo, type Server } from "node:net";
import * as pulumi from "@pulumi/pulumi";
import { ConfigError } from "@portable-lb/core";
import { cloudOutputs } from "../../packages/providers/src/__fixtures__/cloudMocks.ts";
import { installMocks, secretValue, settled, valueOf } from "../../test/unit/pulumiMocks.ts";

const recorded = installMocks({ outputs: (type, _name, inputs) => cloudOutputs(type, inputs) });
// The program, as the engine loads it (module.exports = main).
// eslint-disable-next-line @typescript-eslint/no-require-imports -- the program's own export form
const main = require("./index.ts") as () => Promise<Record<string, unknown>>;

const HOSTS = ["127.0.0.1", "127.0.0.2", "127.0.0.3"];
const PRIVATE_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nexample\n-----END OPENSSH PRIVATE KEY-----\n";

function stackConfig(sshPort: number): Record<string, string> {
  const settings = {
    environment: {
      nodes: [
        { name: "cp", host: HOSTS[0], address: "10.0.0.2", role: "control-plane" },
        { name: "lb-1", host: HOSTS[1], address: "10.0.0.11", role: "lb" },
        { name: "lb-2", host: HOSTS[2], address: "10.0.0.12", role: "lb" },
      ],
      ssh: { user: "admin", port: sshPort },
      bgp: { routers: ["10.0.0.1"] },
    },
    network: {
      nodeCidr: "10.0.0.0/24",
      podCidr: "10.244.0.0/16",
      serviceCidr: "10.96.0.0/16",
      vipPools: [{ name: "web", cidr: "10.1.1.0/24" }],
    },
    loadBalancer: {
      replicas: 2,
      image: "registry.example.com/portable-lb/lb:0.1.0",
      bgp: { asn: 64512 },
      routeReflectors: [{ node: "cp", address: "10.0.0.2" }],
    },
    sshPrivateKey: PRIVATE_KEY,
  };
  const project = pulumi.getProject();
  return Object.fromEntries(
    Object.entries(settings).map(([k, v]) => [
      `${project}:${k}`,
      typeof v === "string" ? v : JSON.stringify(v),
    ]),
  );
}

/** The stack's preview: the program's outputs once every registration reached the mocks. */
async function preview(sshPort: number) {
  pulumi.runtime.setAllConfig(stackConfig(sshPort), [`${pulumi.getProject()}:sshPrivateKey`]);
  recorded.length = 0;
  const outputs = await main();
  await settled();
  return outputs;
}

describe("examples/onprem", () => {
  // One loopback listener per machine, all on one port (environment.ssh.port is shared).
  const listeners: Server[] = [];
  let sshPort = 0;
  beforeAll(async () => {
    for (const host of HOSTS) {
      const server = createServer((socket) => socket.destroy());
      await new Promise<void>((resolve) => server.listen(sshPort, host, resolve));
      sshPort = (server.address() as AddressInfo).port;
      listeners.push(server);
    }
  });
  afterAll(() => Promise.all(listeners.map((s) => new Promise((resolve) => s.close(resolve)))));

  it("previews the SSH bootstrap of every machine and the platform on the cluster it makes", async () => {
    const outputs = await preview(sshPort);
    const commands = recorded.filter((r) => r.type === "command:remote:Command");
    expect(commands.map((c) => c.name).sort()).toEqual(
      ["cp", "lb-1", "lb-2"].flatMap((n) => [`onprem-${n}-bootstrap`, `onprem-${n}-copy`]).sort(),
    );
    for (const c of commands) {
      const connection = secretValue(c.inputs.connection) as Record<string, unknown>;
      expect(connection).toMatchObject({ user: "admin", port: sshPort, privateKey: PRIVATE_KEY });
      expect(HOSTS).toContain(connection.host);
    }
    // PortableCluster talks to the cluster OnpremCluster made, with the admin certificate's kubeconfig.
    const [provider] = recorded.filter((r) => r.type === "pulumi:providers:kubernetes");
    expect(secretValue(provider!.inputs.kubeconfig)).toContain("server: https://10.0.0.2:6443");
    expect(recorded.some((r) => r.type === "kubernetes:apps/v1:Deployment")).toBe(true);
    expect(outputs.routingMode).toBe("bgp");
    expect(outputs.loadBalancerClass).toBe("portable-lb.io/ecmp");
    expect(await valueOf(outputs.routerConfig as pulumi.Output<string>)).toContain("neighbor 10.0.0.2");
  });

  it("fails the preview naming each machine whose SSH port does not answer, before anything registers", async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const err = await preview(port).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).problems.map((p) => p.split(":")[0])).toEqual([
      "environment.nodes[0].host",
      "environment.nodes[1].host",
      "environment.nodes[2].host",
    ]);
    expect((err as ConfigError).problems[1]).toContain(`node lb-1: SSH at 127.0.0.2:${port} did not answer`);
    expect(recorded).toEqual([]);
  });
});
