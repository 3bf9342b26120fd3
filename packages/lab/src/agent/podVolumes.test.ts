import type { V1ConfigMap, V1Pod } from "@kubernetes/client-node";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  checkVolumesSupported,
  configMapBytes,
  downwardFile,
  hostPathSource,
  keyFiles,
  prepareVolumes,
  referencedObjects,
  tokenRenewal,
  type VolumeSources,
} from "./podVolumes.ts";

const root = mkdtempSync(join(tmpdir(), "plb-vol-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const pod: V1Pod = {
  metadata: { name: "web-1", namespace: "shop", uid: "u1", labels: { app: "web" } },
  spec: {
    serviceAccountName: "web",
    containers: [
      { name: "c", resources: { limits: { cpu: "500m" } }, envFrom: [{ secretRef: { name: "env-secret" } }] },
    ],
    volumes: [
      {
        name: "conf",
        configMap: { name: "app", items: [{ key: "app.conf", path: "conf/app.conf", mode: 0o600 }] },
      },
      { name: "creds", secret: { secretName: "creds" } },
      { name: "scratch", emptyDir: {} },
      {
        name: "info",
        downwardAPI: { items: [{ path: "labels", fieldRef: { fieldPath: "metadata.labels" } }] },
      },
      {
        name: "kube-api-access",
        projected: {
          sources: [
            { serviceAccountToken: { path: "token", expirationSeconds: 3607 } },
            { configMap: { name: "kube-root-ca.crt", items: [{ key: "ca.crt", path: "ca.crt" }] } },
            {
              downwardAPI: { items: [{ path: "namespace", fieldRef: { fieldPath: "metadata.namespace" } }] },
            },
          ],
        },
      },
      { name: "run", hostPath: { path: "/run/flannel", type: "DirectoryOrCreate" } },
      { name: "lock", hostPath: { path: "/run/xtables.lock", type: "FileOrCreate" } },
    ],
  },
};

const sources = (over: Partial<VolumeSources> = {}): VolumeSources => ({
  pod,
  runtime: {
    podIP: "10.244.1.5",
    podIPs: ["10.244.1.5"],
    hostIP: "192.168.100.11",
    hostIPs: ["192.168.100.11"],
  },
  allocatable: { cpu: 2, memory: 2 ** 30, "ephemeral-storage": 0 },
  configMap: (name) =>
    (
      ({
        app: { data: { "app.conf": "mode=fast", other: "x" } },
        "kube-root-ca.crt": { data: { "ca.crt": "-----CA-----" } },
      }) as Record<string, V1ConfigMap>
    )[name],
  secret: (name) =>
    name === "creds" ? { data: { password: Buffer.from("s3cret").toString("base64") } } : undefined,
  token: () => Promise.resolve({ token: "eyJ.token", renewAt: new Date(Date.now() + 3_600_000) }),
  ...over,
});

describe("prepareVolumes", () => {
  it("projects every supported volume into the pod folder and maps hostPath into the node root", async () => {
    const podDir = join(root, "pod");
    const nodeRoot = join(root, "node1");
    const { volumes, renewAt } = await prepareVolumes(podDir, nodeRoot, sources());
    const read = (v: string, f: string) => readFileSync(join(volumes.get(v)!.path, f), "utf8");
    expect(read("conf", "conf/app.conf")).toBe("mode=fast");
    expect(statSync(join(volumes.get("conf")!.path, "conf/app.conf")).mode & 0o777).toBe(0o600);
    expect(existsSync(join(volumes.get("conf")!.path, "other"))).toBe(false);
    expect(read("creds", "password")).toBe("s3cret");
    expect(read("info", "labels")).toBe('app="web"');
    expect(read("kube-api-access", "token")).toBe("eyJ.token");
    expect(read("kube-api-access", "ca.crt")).toBe("-----CA-----");
    expect(read("kube-api-access", "namespace")).toBe("shop");
    expect(statSync(volumes.get("scratch")!.path).mode & 0o777).toBe(0o777);
    expect(volumes.get("run")).toEqual({ path: join(nodeRoot, "run/flannel"), alwaysReadOnly: false });
    expect(statSync(join(nodeRoot, "run/flannel")).isDirectory()).toBe(true);
    expect(statSync(join(nodeRoot, "run/xtables.lock")).isFile()).toBe(true);
    expect(volumes.get("conf")!.alwaysReadOnly).toBe(true);
    expect(volumes.get("scratch")!.alwaysReadOnly).toBe(false);
    expect(renewAt).toBeInstanceOf(Date);
  });

  it("fails (to be retried) on a missing source, unless it is optional", async () => {
    const dir = join(root, "pod2");
    await expect(prepareVolumes(dir, root, sources({ configMap: () => undefined }))).rejects.toThrow(
      /ConfigMap shop\/app not found/,
    );
    const p = {
      ...pod,
      spec: { ...pod.spec!, volumes: [{ name: "o", configMap: { name: "gone", optional: true } }] },
    };
    await expect(
      prepareVolumes(dir, root, sources({ pod: p, configMap: () => undefined })),
    ).resolves.toBeDefined();
    const file = {
      ...pod,
      spec: { ...pod.spec!, volumes: [{ name: "f", hostPath: { path: "/nope", type: "File" } }] },
    };
    await expect(prepareVolumes(dir, root, sources({ pod: file }))).rejects.toThrow(
      /is not an existing file/,
    );
  });
});

describe("volume pieces", () => {
  it("takes every key, or only the listed items, of a ConfigMap", () => {
    const data = configMapBytes({
      data: { a: "1" },
      binaryData: { b: Buffer.from([0, 1]).toString("base64") },
    });
    expect([...keyFiles("cm", data, undefined, false, 0o644).keys()]).toEqual(["a", "b"]);
    expect(keyFiles("cm", data, undefined, false, 0o644).get("b")!.content).toEqual(Buffer.from([0, 1]));
    expect(() => keyFiles("cm", data, [{ key: "zz", path: "z" }], false, 0o644)).toThrow(/has no key "zz"/);
    expect(keyFiles("cm", data, [{ key: "zz", path: "z" }], true, 0o644).size).toBe(0);
  });

  it("writes downward-API resource values of a named container", () => {
    expect(
      downwardFile(
        { path: "cpu", resourceFieldRef: { containerName: "c", resource: "limits.cpu", divisor: "1m" } },
        sources(),
      ),
    ).toBe("500");
  });

  it("keeps hostPath inside the node root", () => {
    expect(hostPathSource("/lab/n1", "/run/flannel")).toBe("/lab/n1/run/flannel");
    expect(hostPathSource("/lab/n1", "/../../etc")).toBe("/lab/n1/etc");
  });

  it("renews a token at 80% of its life, at most a day on", () => {
    const now = new Date(0);
    expect(tokenRenewal(now, new Date(3600_000)).getTime()).toBe(2880_000);
    expect(tokenRenewal(now, new Date(365 * 86_400_000)).getTime()).toBe(86_400_000);
  });

  it("names what the agent cannot mount, and what the pod reads", () => {
    expect(() =>
      checkVolumesSupported({
        spec: { containers: [], volumes: [{ name: "d", persistentVolumeClaim: { claimName: "x" } }] },
      }),
    ).toThrow(/persistentVolumeClaim volumes are not supported/);
    expect(() => checkVolumesSupported(pod)).not.toThrow();
    const refs = referencedObjects(pod);
    expect([...refs.configMaps].sort()).toEqual(["app", "kube-root-ca.crt"]);
    expect([...refs.secrets].sort()).toEqual(["creds", "env-secret"]);
  });
});
