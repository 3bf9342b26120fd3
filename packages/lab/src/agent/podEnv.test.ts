import type { V1Container, V1Pod } from "@kubernetes/client-node";
import {
  ContainerConfigError,
  containerEnv,
  expandCommand,
  expandVars,
  fieldRefValue,
  formatMap,
  resourceFieldValue,
  type EnvContext,
} from "./podEnv.ts";

const pod: V1Pod = {
  metadata: {
    name: "web-1",
    namespace: "shop",
    uid: "u-1",
    labels: { app: "web", "example.com/tier": "front" },
    annotations: { note: "x" },
  },
  spec: {
    nodeName: "node1",
    serviceAccountName: "web",
    containers: [{ name: "c", resources: { limits: { memory: "128Mi" }, requests: { cpu: "250m" } } }],
  },
};
const runtime = {
  podIP: "10.244.1.5",
  podIPs: ["10.244.1.5"],
  hostIP: "192.168.100.11",
  hostIPs: ["192.168.100.11"],
};
const allocatable = { cpu: 4, memory: 8 * 2 ** 30, "ephemeral-storage": 0 };
const ctx = (o: Partial<EnvContext> = {}): EnvContext => ({
  pod,
  runtime,
  configMap: (name) => (name === "settings" ? { MODE: "fast", "bad=key": "x", LEVEL: "3" } : undefined),
  secret: (name) => (name === "creds" ? { password: "s3cret" } : undefined),
  allocatable,
  apiServer: { host: "192.168.100.1", port: 6443 },
  ...o,
});

describe("expandVars", () => {
  const lookup = (n: string) => ({ A: "x", B: "y" })[n];
  it("follows Kubernetes' $(VAR) rules", () => {
    expect(expandVars("$(A)-$(B)", lookup)).toBe("x-y");
    expect(expandVars("$$(A) $(UNKNOWN) $A $", lookup)).toBe("$(A) $(UNKNOWN) $A $");
    expect(expandVars("tail $(A", lookup)).toBe("tail $(A");
  });
});

describe("fieldRefValue", () => {
  it("answers every fieldRef env vars accept", () => {
    const v = (p: string) => fieldRefValue(pod, p, runtime);
    expect(v("metadata.name")).toBe("web-1");
    expect(v("metadata.namespace")).toBe("shop");
    expect(v("metadata.uid")).toBe("u-1");
    expect(v("spec.nodeName")).toBe("node1");
    expect(v("spec.serviceAccountName")).toBe("web");
    expect(v("status.podIP")).toBe("10.244.1.5");
    expect(v("status.podIPs")).toBe("10.244.1.5");
    expect(v("status.hostIP")).toBe("192.168.100.11");
    expect(v("metadata.labels['example.com/tier']")).toBe("front");
    expect(v("metadata.annotations['note']")).toBe("x");
    expect(() => v("spec.containers")).toThrow(ContainerConfigError);
  });

  it("formats label maps as the downward API's files do", () => {
    expect(formatMap({ b: 'q"x', a: "1" })).toBe('a="1"\nb="q\\"x"');
  });
});

describe("resourceFieldValue", () => {
  const res = { limits: { memory: "128Mi" }, requests: { cpu: "250m" } };
  it("divides and rounds up; an unset limit is the node's allocatable", () => {
    expect(resourceFieldValue(res, "limits.memory", undefined, allocatable)).toBe(String(128 * 2 ** 20));
    expect(resourceFieldValue(res, "limits.memory", "1Mi", allocatable)).toBe("128");
    expect(resourceFieldValue(res, "requests.cpu", undefined, allocatable)).toBe("1");
    expect(resourceFieldValue(res, "requests.cpu", "1m", allocatable)).toBe("250");
    expect(resourceFieldValue(res, "limits.cpu", undefined, allocatable)).toBe("4");
    expect(resourceFieldValue(res, "requests.memory", undefined, allocatable)).toBe("0");
    expect(() => resourceFieldValue(res, "limits.gpu", undefined, allocatable)).toThrow(/unsupported/);
  });
});

describe("containerEnv", () => {
  const c: V1Container = {
    name: "c",
    resources: { limits: { memory: "128Mi" } },
    envFrom: [{ configMapRef: { name: "settings" } }, { prefix: "S_", secretRef: { name: "creds" } }],
    env: [
      { name: "LEVEL", value: "9" },
      { name: "POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
      { name: "POD_IP", valueFrom: { fieldRef: { fieldPath: "status.podIP" } } },
      { name: "URL", value: "http://$(POD_IP):80/$(MODE)" },
      { name: "PASS", valueFrom: { secretKeyRef: { name: "creds", key: "password" } } },
      { name: "MEM", valueFrom: { resourceFieldRef: { resource: "limits.memory", divisor: "1Mi" } } },
      { name: "MAYBE", valueFrom: { configMapKeyRef: { name: "absent", key: "k", optional: true } } },
      { name: "KUBERNETES_SERVICE_PORT", value: "443" },
    ],
    command: ["/bin/app", "--ip=$(POD_IP)"],
    args: ["$(URL)", "$$(POD_IP)"],
  };

  it("builds envFrom, then env in order with $(VAR) of earlier ones, then the API server's address", () => {
    const env = containerEnv(c, ctx());
    expect(Object.fromEntries(env)).toEqual({
      KUBERNETES_SERVICE_HOST: "192.168.100.1",
      // The spec's own value wins over the agent's.
      KUBERNETES_SERVICE_PORT: "443",
      KUBERNETES_SERVICE_PORT_HTTPS: "6443",
      MODE: "fast",
      LEVEL: "9",
      S_password: "s3cret",
      POD_NAME: "web-1",
      POD_IP: "10.244.1.5",
      URL: "http://10.244.1.5:80/fast",
      PASS: "s3cret",
      MEM: "128",
    });
    expect(expandCommand(c, env)).toEqual([
      "/bin/app",
      "--ip=10.244.1.5",
      "http://10.244.1.5:80/fast",
      "$(POD_IP)",
    ]);
  });

  it("refuses a missing ConfigMap, Secret or key unless optional", () => {
    const one = (env: V1Container["env"], envFrom?: V1Container["envFrom"]) => () =>
      containerEnv({ name: "c", env, ...(envFrom && { envFrom }) }, ctx());
    expect(one([{ name: "X", valueFrom: { configMapKeyRef: { name: "absent", key: "k" } } }])).toThrow(
      /ConfigMap "absent" not found \(env X\)/,
    );
    expect(one([{ name: "X", valueFrom: { secretKeyRef: { name: "creds", key: "nope" } } }])).toThrow(
      /key "nope" not found in Secret "creds"/,
    );
    expect(one([], [{ secretRef: { name: "gone" } }])).toThrow(/Secret "gone" not found/);
    expect(one([], [{ secretRef: { name: "gone", optional: true } }])()).toBeInstanceOf(Map);
  });

  it("reads another container's resources when resourceFieldRef names it", () => {
    const env = containerEnv(
      {
        name: "other",
        env: [
          {
            name: "CPU",
            valueFrom: { resourceFieldRef: { containerName: "c", resource: "requests.cpu", divisor: "1m" } },
          },
        ],
      },
      ctx(),
    );
    expect(env.get("CPU")).toBe("250");
  });
});
