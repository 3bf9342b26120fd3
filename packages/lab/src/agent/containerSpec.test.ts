import type { V1Container, V1Pod } from "@kubernetes/client-node";
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { containerSpec, podHostname, type ContainerInputs } from "./containerSpec.ts";

const root = mkdtempSync(join(tmpdir(), "plb-spec-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const vol = (name: string) => {
  const path = join(root, "volumes", name);
  mkdirSync(path, { recursive: true });
  return path;
};
const configPath = vol("config");
writeFileSync(join(configPath, "app.conf"), "x");
const dataPath = vol("data");

const container: V1Container = {
  name: "web",
  command: ["/opt/bin/web", "--listen=$(POD_IP):80"],
  env: [
    { name: "POD_IP", valueFrom: { fieldRef: { fieldPath: "status.podIP" } } },
    { name: "BLOB", valueFrom: { configMapKeyRef: { name: "cm", key: "blob" } } },
    { name: "SUB", value: "nested" },
  ],
  volumeMounts: [
    { name: "data", mountPath: "/var/lib/web/cache", subPathExpr: "$(SUB)/cache" },
    { name: "config", mountPath: "/etc/web/app.conf", subPath: "app.conf" },
    { name: "data", mountPath: "/var/lib/web" },
    { name: "config", mountPath: "/etc/web-ro", readOnly: false },
  ],
  securityContext: { runAsUser: 1000 },
};
const pod = (spec: Partial<NonNullable<V1Pod["spec"]>> = {}): V1Pod => ({
  metadata: { name: "web-1", namespace: "shop", uid: "u1" },
  spec: { containers: [container], ...spec },
});
const inputs = (o: Partial<ContainerInputs> = {}): ContainerInputs => ({
  pod: pod(),
  container,
  podDir: root,
  volumes: new Map([
    ["config", { path: configPath, alwaysReadOnly: true }],
    ["data", { path: dataPath, alwaysReadOnly: false }],
  ]),
  runtime: {
    podIP: "10.244.1.5",
    podIPs: ["10.244.1.5"],
    hostIP: "192.168.100.11",
    hostIPs: ["192.168.100.11"],
  },
  configMap: (name) =>
    name === "cm" ? { binaryData: { blob: Buffer.from("bytes").toString("base64") } } : undefined,
  secret: () => undefined,
  allocatable: { cpu: 2, memory: 2 ** 30, "ephemeral-storage": 0 },
  apiServer: { host: "192.168.100.1", port: 6443 },
  agentPath: "/opt/lab/bin:/usr/bin",
  hostname: "web-1",
  ...o,
});

describe("containerSpec", () => {
  it("gives the container the runtime's variables, its own winning, and expands its command", () => {
    const s = containerSpec(inputs());
    expect(s.env).toMatchObject({
      PATH: "/opt/lab/bin:/usr/bin",
      HOSTNAME: "web-1",
      HOME: "/",
      POD_IP: "10.244.1.5",
      BLOB: "bytes",
      KUBERNETES_SERVICE_HOST: "192.168.100.1",
    });
    expect(s.argv).toEqual(["/opt/bin/web", "--listen=10.244.1.5:80"]);
    expect(s.setpriv.slice(0, 4)).toEqual(["--reuid", "1000", "--regid", "0"]);
  });

  it("mounts parents first, subPaths from the volume, read-only where the volume type wants it", () => {
    const s = containerSpec(inputs());
    expect(s.mounts.map((m) => [m.target, m.source.replace(root, "<pod>"), m.readOnly, m.file])).toEqual([
      ["/etc/web-ro", "<pod>/volumes/config", true, false],
      ["/etc/hosts", "<pod>/etc-hosts", false, true],
      ["/dev/termination-log", "<pod>/web.termination-log", false, true],
      ["/etc/web/app.conf", "<pod>/volumes/config/app.conf", true, true],
      ["/var/lib/web", "<pod>/volumes/data", false, false],
      ["/var/lib/web/cache", "<pod>/volumes/data/nested/cache", false, false],
    ]);
    // A missing subPath is made in the volume; the termination-message file is writable by any user.
    expect(statSync(join(dataPath, "nested/cache")).isDirectory()).toBe(true);
    expect(statSync(join(root, "web.termination-log")).mode & 0o777).toBe(0o666);
  });

  it("gives a hostNetwork pod the node's /etc/hosts and hostname", () => {
    const s = containerSpec(inputs({ pod: pod({ hostNetwork: true }) }));
    expect(s.mounts.map((m) => m.target)).not.toContain("/etc/hosts");
    expect(podHostname(pod({ hostNetwork: true }), "node1.lab")).toBe("node1");
    expect(podHostname(pod({ hostname: "db-0" }), "node1")).toBe("db-0");
    expect(podHostname(pod(), "node1")).toBe("web-1");
  });

  it("refuses a subPath that climbs out of its volume, and a mount of a volume the pod lacks", () => {
    const climb = { ...container, volumeMounts: [{ name: "data", mountPath: "/x", subPath: "../../etc" }] };
    expect(() => containerSpec(inputs({ container: climb }))).toThrow(/must be relative without ".."/);
    const missing = { ...container, volumeMounts: [{ name: "nope", mountPath: "/x" }] };
    expect(() => containerSpec(inputs({ container: missing }))).toThrow(/the pod has no such volume/);
  });
});
