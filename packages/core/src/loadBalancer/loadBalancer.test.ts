import * as pulumi from "@pulumi/pulumi";
import { installMocks, secretValue, settled, typeChain, valueOf } from "../../../../test/unit/pulumiMocks.ts";
import { configHash } from "../configHash.ts";
import { LB_POD_LABELS } from "../config/lbImage.ts";
import { lbConfigSchema, type LbConfigInput } from "../config/lbConfig.ts";
import { LoadBalancer } from "./loadBalancer.ts";

const recorded = installMocks();
const IMAGE = "registry.example/portable-lb/lb:1";
beforeEach(() => (recorded.length = 0));

const bgpConfig: LbConfigInput = {
  routingMode: "bgp",
  podCidr: "10.244.0.0/16",
  vipPools: [{ name: "default", cidr: "10.1.1.0/24" }],
  bgp: { asn: 64512, routeReflectors: ["10.0.0.5", "10.0.0.6"] },
};
const cloudConfig: LbConfigInput = {
  routingMode: "cloud-routes",
  podCidr: "10.244.0.0/16",
  vipPools: [{ name: "default", cidr: "10.1.1.0/24" }],
  cloudRoutes: { cloud: "aws", routeTableIds: ["rtb-0abc"] },
};

const byType = (type: string) => recorded.filter((r) => r.type === type);
const one = (type: string) => {
  const found = byType(type);
  expect(found).toHaveLength(1);
  return found[0]!.inputs;
};

describe("LoadBalancer", () => {
  it("builds the resource graph under the component", async () => {
    const lb = new LoadBalancer("lb", {
      image: IMAGE,
      config: bgpConfig,
      replicas: 3,
    });
    await settled();
    expect(recorded.map((r) => r.type).sort()).toEqual(
      [
        "kubernetes:apps/v1:Deployment",
        "kubernetes:apps/v1:DaemonSet",
        "kubernetes:core/v1:ConfigMap",
        "kubernetes:core/v1:Namespace",
        "kubernetes:core/v1:ServiceAccount",
        "kubernetes:core/v1:ServiceAccount",
        "kubernetes:policy/v1:PodDisruptionBudget",
        "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole",
        "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding",
        "kubernetes:rbac.authorization.k8s.io/v1:Role",
        "kubernetes:rbac.authorization.k8s.io/v1:Role",
        "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding",
        "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding",
        "kubernetes:scheduling.k8s.io/v1:PriorityClass",
        "portable-lb:core:LoadBalancer",
        "portable-lb:core:NodeAgent",
        "portable-lb:core:SystemNamespace",
      ].sort(),
    );
    for (const r of [
      lb.serviceAccount,
      lb.clusterRole,
      lb.role,
      lb.configMap,
      lb.deployment,
      lb.priorityClass,
    ]) {
      expect(await typeChain(r)).toMatch(/^portable-lb:core:LoadBalancer\$kubernetes:/);
    }
    expect(await valueOf(lb.namespace)).toBe("portable-lb-system");
    expect(await typeChain(lb.nodeAgent)).toBe("portable-lb:core:LoadBalancer$portable-lb:core:NodeAgent");
    for (const r of [lb.nodeAgent.serviceAccount, lb.nodeAgent.role, lb.nodeAgent.daemonSet]) {
      expect(await typeChain(r)).toMatch(/^portable-lb:core:NodeAgent\$kubernetes:/);
    }
  });

  it("grants exactly: read services and endpointslices, write service status, events, and leases in its namespace", async () => {
    new LoadBalancer("lb", {
      image: IMAGE,
      config: bgpConfig,
      replicas: 1,
    });
    await settled();
    expect(one("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole").rules).toEqual([
      { apiGroups: [""], resources: ["services"], verbs: ["get", "list", "watch", "patch"] },
      { apiGroups: [""], resources: ["services/status"], verbs: ["update", "patch"] },
      { apiGroups: ["discovery.k8s.io"], resources: ["endpointslices"], verbs: ["get", "list", "watch"] },
      { apiGroups: ["", "events.k8s.io"], resources: ["events"], verbs: ["create", "patch"] },
    ]);
    const roles = Object.fromEntries(
      byType("kubernetes:rbac.authorization.k8s.io/v1:Role").map((r) => [r.inputs.metadata.name, r.inputs]),
    );
    expect(roles["portable-lb-controller"].metadata.namespace).toBe("portable-lb-system");
    expect(roles["portable-lb-controller"].rules).toEqual([
      { apiGroups: ["coordination.k8s.io"], resources: ["leases"], verbs: ["get", "create", "update"] },
    ]);
    expect(roles["portable-lb-node-agent"].metadata.namespace).toBe("portable-lb-system");
    expect(roles["portable-lb-node-agent"].rules).toEqual([
      { apiGroups: [""], resources: ["pods"], verbs: ["get", "list", "watch"] },
    ]);
    const bindings = byType("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding").map((r) => r.inputs);
    expect(bindings.map((b) => [b.roleRef.name, b.subjects[0].name]).sort()).toEqual([
      ["portable-lb-controller", "portable-lb-controller"],
      ["portable-lb-node-agent", "portable-lb-node-agent"],
    ]);
  });

  // The agent's own pod spec and RBAC: nodeAgent.test.ts. Here: it shares the LB pods' nodes and config.
  it("runs a node agent on every LB node, with the LB config", async () => {
    new LoadBalancer("lb", {
      image: IMAGE,
      config: bgpConfig,
      replicas: 3,
    });
    await settled();
    const ds = one("kubernetes:apps/v1:DaemonSet");
    const dep = one("kubernetes:apps/v1:Deployment");
    const pod = ds.spec.template.spec;
    expect(ds.metadata.namespace).toBe(dep.metadata.namespace);
    expect(pod.nodeSelector).toEqual(dep.spec.template.spec.nodeSelector);
    expect(pod.tolerations).toEqual(dep.spec.template.spec.tolerations);
    expect(pod.containers[0].image).toBe(dep.spec.template.spec.containers[0].image);
    expect(pod.volumes).toEqual(
      dep.spec.template.spec.volumes.filter((v: { name: string }) => v.name === "config"),
    );
    // A config change rolls the agents too.
    expect(ds.spec.template.metadata.annotations).toEqual(dep.spec.template.metadata.annotations);
  });

  it("with dataPlane.mode dsr, runs the node agent on every node, entering the runtime's pod namespaces", async () => {
    new LoadBalancer("lb", {
      image: IMAGE,
      config: { ...bgpConfig, dataPlane: { mode: "dsr" } },
      replicas: 3,
      podNetnsDir: "/var/lib/runtime/netns",
    });
    await settled();
    const pod = one("kubernetes:apps/v1:DaemonSet").spec.template.spec;
    expect(pod.nodeSelector).toBeUndefined();
    expect(pod.containers[0].securityContext.capabilities.add).toEqual(["NET_ADMIN", "SYS_ADMIN"]);
    expect(pod.volumes).toContainEqual(
      expect.objectContaining({ hostPath: { path: "/var/lib/runtime/netns", type: "DirectoryOrCreate" } }),
    );
    // The controller serves by DSR: the mode is in the config both read.
    const config = JSON.parse(one("kubernetes:core/v1:ConfigMap").data["config.json"]);
    expect(config.dataPlane).toEqual({ engine: "auto", mode: "dsr", scheduler: "mh", fastPath: "auto" });
    // The DSR fast path: the controller loads its tc program (CAP_BPF), and no more than that.
    expect(
      one("kubernetes:apps/v1:Deployment").spec.template.spec.containers[0].securityContext.capabilities.add,
    ).toEqual(["NET_ADMIN", "BPF"]);
    // Only DSR reads NetworkPolicies (whether they let its tunnel reach the backends).
    const controllerRole = byType("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole").find(
      (r) => r.inputs.metadata.name === "portable-lb-controller",
    )!;
    expect(controllerRole.inputs.rules).toContainEqual({
      apiGroups: ["networking.k8s.io"],
      resources: ["networkpolicies"],
      verbs: ["get", "list", "watch"],
    });
    // The pods carry the labels the controller matches NetworkPolicy peers against.
    expect(one("kubernetes:apps/v1:Deployment").spec.template.metadata.labels).toEqual(LB_POD_LABELS);
  });

  it("gives the LB pods no CAP_BPF with the DSR fast path off", async () => {
    new LoadBalancer("lb", {
      image: IMAGE,
      config: { ...bgpConfig, dataPlane: { mode: "dsr", fastPath: "off" } },
      replicas: 3,
      podNetnsDir: "/var/lib/runtime/netns",
    });
    await settled();
    const controller = one("kubernetes:apps/v1:Deployment").spec.template.spec.containers[0];
    expect(controller.securityContext.capabilities.add).toEqual(["NET_ADMIN"]);
  });

  it("gives the pod time for a longer drain when drain.timeoutS asks for one", async () => {
    new LoadBalancer("lb", {
      image: IMAGE,
      config: { ...bgpConfig, drain: { timeoutS: 300 } },
      replicas: 2,
    });
    await settled();
    expect(one("kubernetes:apps/v1:Deployment").spec.template.spec.terminationGracePeriodSeconds).toBe(325);
  });

  it("runs controller + BGP speaker in bgp mode, with only NET_ADMIN / NET_BIND_SERVICE and no privileged", async () => {
    new LoadBalancer("lb", {
      image: IMAGE,
      config: bgpConfig,
      replicas: 3,
    });
    await settled();
    const dep = one("kubernetes:apps/v1:Deployment");
    const pod = dep.spec.template.spec;
    expect(dep.spec.replicas).toBe(3);
    expect(pod.containers.map((c: { name: string }) => c.name)).toEqual(["controller", "bgp-speaker"]);
    const [controller, speaker] = pod.containers;
    expect(controller.securityContext).toEqual({
      privileged: false,
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      runAsUser: 0,
      capabilities: { drop: ["ALL"], add: ["NET_ADMIN"] },
      seccompProfile: { type: "RuntimeDefault" },
    });
    expect(speaker.securityContext.capabilities).toEqual({ drop: ["ALL"], add: ["NET_BIND_SERVICE"] });
    expect(speaker.securityContext.privileged).toBe(false);
    expect(controller.lifecycle.preStop.httpGet.path).toBe("/prestop");
    // The speaker container mounts no LB config: the controller's health port is an argument.
    expect(speaker.lifecycle.preStop.exec.command).toEqual(["portable-lb-withdraw", "--port", "9151"]);
    // The kubelet waits for preStop (at most 20 s), the drain (drain.timeoutS, 30 s) and 5 s to exit.
    expect(pod.terminationGracePeriodSeconds).toBe(55);
    expect(controller.readinessProbe.httpGet).toEqual({ path: "/readyz", port: "health" });
    expect(controller.ports).toEqual([
      { name: "metrics", containerPort: 9150, protocol: "TCP" },
      { name: "health", containerPort: 9151, protocol: "TCP" },
    ]);
    // The heap the reconcile benchmark measured 10,000 Services in, within the container's limit.
    expect(controller.resources.limits).toEqual({ memory: "512Mi" });
    expect(controller.env).toContainEqual({
      name: "NODE_OPTIONS",
      value: "--max-old-space-size=256 --max-semi-space-size=4",
    });
    // Its Events on its own pod carry the pod's uid, or `kubectl describe pod` would not show them.
    expect(controller.env).toContainEqual({
      name: "POD_UID",
      valueFrom: { fieldRef: { fieldPath: "metadata.uid" } },
    });
    expect(pod.nodeSelector).toEqual({ "portable-lb.io/load-balancer": "true" });
    expect(pod.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey).toBe(
      "kubernetes.io/hostname",
    );
    expect(pod.priorityClassName).toBe("portable-lb-dataplane");
    expect(one("kubernetes:policy/v1:PodDisruptionBudget").spec.maxUnavailable).toBe(1);
  });

  it("runs the controller alone in cloud-routes mode, without BIRD's volume", async () => {
    new LoadBalancer("lb", {
      image: IMAGE,
      config: cloudConfig,
      replicas: 2,
    });
    await settled();
    const pod = one("kubernetes:apps/v1:Deployment").spec.template.spec;
    expect(pod.containers.map((c: { name: string }) => c.name)).toEqual(["controller"]);
    expect(pod.volumes.map((v: { name: string }) => v.name)).toEqual(["config", "tmp"]);
  });

  it("writes an environment's route tables, known once created, into its config and config hash", async () => {
    const lb = new LoadBalancer("lb", {
      config: { ...cloudConfig, cloudRoutes: { cloud: "aws" } },
      replicas: 2,
      image: IMAGE,
      routeTableIds: pulumi.output(["rtb-0def"]),
    });
    await settled();
    const config = JSON.parse(
      one("kubernetes:core/v1:ConfigMap").data["config.json"] as string,
    ) as LbConfigInput;
    expect(config.cloudRoutes).toMatchObject({ cloud: "aws", routeTableIds: ["rtb-0def"] });
    const hash = one("kubernetes:apps/v1:Deployment").spec.template.metadata.annotations[
      "portable-lb.io/config-hash"
    ];
    expect(hash).toBe(configHash(JSON.stringify(config, null, 2)));
    expect(lb.config.cloudRoutes?.routeTableIds).toBeUndefined();
  });

  it("grants cloud-routes mode only reading Nodes and watching its Leases on top", async () => {
    new LoadBalancer("lb", { config: cloudConfig, replicas: 2, image: IMAGE });
    await settled();
    expect(one("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole").rules).toContainEqual({
      apiGroups: [""],
      resources: ["nodes"],
      verbs: ["get"],
    });
    const role = byType("kubernetes:rbac.authorization.k8s.io/v1:Role").find(
      (r) => r.inputs.metadata.name === "portable-lb-controller",
    )!;
    expect(role.inputs.rules).toEqual([
      { apiGroups: ["coordination.k8s.io"], resources: ["leases"], verbs: ["get", "create", "update"] },
      { apiGroups: ["coordination.k8s.io"], resources: ["leases"], verbs: ["list", "watch"] },
    ]);
  });

  it("grants DSR on the IPVS engine watching its Leases (the nodes' IPIP say), and nftables DSR not", async () => {
    const controllerRole = () =>
      byType("kubernetes:rbac.authorization.k8s.io/v1:Role").find(
        (r) => r.inputs.metadata.name === "portable-lb-controller",
      )!.inputs.rules;
    const watchLeases = {
      apiGroups: ["coordination.k8s.io"],
      resources: ["leases"],
      verbs: ["list", "watch"],
    };
    new LoadBalancer("lb", {
      config: { ...bgpConfig, dataPlane: { mode: "dsr", engine: "ipvs" } },
      replicas: 2,
      image: IMAGE,
    });
    await settled();
    expect(controllerRole()).toContainEqual(watchLeases);
    recorded.length = 0;
    new LoadBalancer("lb2", {
      config: { ...bgpConfig, dataPlane: { mode: "dsr" } },
      replicas: 2,
      image: IMAGE,
    });
    await settled();
    expect(controllerRole()).not.toContainEqual(watchLeases);
  });

  it("renders a config the controller's schema parses back to the same value", async () => {
    const lb = new LoadBalancer("lb", {
      image: IMAGE,
      config: bgpConfig,
      replicas: 1,
    });
    await settled();
    const json = one("kubernetes:core/v1:ConfigMap").data["config.json"];
    expect(lbConfigSchema.parse(JSON.parse(json))).toEqual(lb.config);
  });

  it("tells Prometheus where the metrics are, by annotations or PodMonitors that match the pods and ports", async () => {
    new LoadBalancer("lb", {
      image: IMAGE,
      config: { ...bgpConfig, ports: { metrics: 9250, nodeAgent: 9252 } },
      replicas: 1,
      monitoring: { scrapeAnnotations: true, podMonitors: true, podMonitorLabels: { release: "kps" } },
    });
    await settled();
    type Template = {
      metadata: { labels: Record<string, string>; annotations: Record<string, string> };
      spec: { containers: { ports?: { name: string; containerPort: number }[] }[] };
    };
    const templates = ["kubernetes:apps/v1:Deployment", "kubernetes:apps/v1:DaemonSet"].map(
      (t) => (one(t).spec as { template: Template }).template,
    );
    const monitors = byType("kubernetes:monitoring.coreos.com/v1:PodMonitor").map((r) => r.inputs);
    expect(monitors).toHaveLength(2);
    for (const [template, port] of [
      [templates[0]!, 9250],
      [templates[1]!, 9252],
    ] as const) {
      expect(template.metadata.annotations).toMatchObject({
        "prometheus.io/scrape": "true",
        "prometheus.io/port": String(port),
        "prometheus.io/path": "/metrics",
      });
      // Exactly one PodMonitor selects these pods, on a port of theirs that is the annotated one.
      const selecting = monitors.filter((m) =>
        Object.entries(m.spec.selector.matchLabels as Record<string, string>).every(
          ([k, v]) => template.metadata.labels[k] === v,
        ),
      );
      expect(selecting).toHaveLength(1);
      expect(selecting[0]!.metadata.labels).toMatchObject({ release: "kps" });
      const [endpoint] = selecting[0]!.spec.podMetricsEndpoints as { port: string; path: string }[];
      const named = template.spec.containers
        .flatMap((c) => c.ports ?? [])
        .find((p) => p.name === endpoint!.port);
      expect({ port: named?.containerPort, path: endpoint!.path }).toEqual({ port, path: "/metrics" });
    }
  });

  it("adds neither scrape annotations nor PodMonitors unless asked", async () => {
    new LoadBalancer("lb", { image: IMAGE, config: bgpConfig, replicas: 1 });
    await settled();
    expect(byType("kubernetes:monitoring.coreos.com/v1:PodMonitor")).toEqual([]);
    const annotations = (
      one("kubernetes:apps/v1:Deployment").spec as { template: { metadata: { annotations: object } } }
    ).template.metadata.annotations;
    expect(Object.keys(annotations).filter((k) => k.startsWith("prometheus.io/"))).toEqual([]);
  });

  it("keeps the BGP password in a Secret (as a Pulumi secret) and points the config at its mount", async () => {
    const lb = new LoadBalancer("lb", {
      image: IMAGE,
      config: bgpConfig,
      replicas: 1,
      bgpPassword: pulumi.secret("s3cret"),
    });
    await valueOf(lb.deployment.urn);
    const secret = one("kubernetes:core/v1:Secret");
    expect(secretValue(secret.stringData)).toEqual({ password: "s3cret" });
    expect(lb.config.bgp?.passwordFile).toBe("/etc/portable-lb/bgp/password");
    expect(JSON.stringify(recorded.filter((r) => r.type !== "kubernetes:core/v1:Secret"))).not.toContain(
      "s3cret",
    );
    // The controller renders BIRD's config with it: the Secret is projected into the controller's
    // config volume (the one mount; a mount nested in it would need a mountpoint there).
    const pod = one("kubernetes:apps/v1:Deployment").spec.template.spec;
    expect(pod.volumes).toContainEqual({
      name: "config",
      projected: {
        sources: [
          { configMap: { name: "portable-lb-controller-config" } },
          {
            secret: {
              name: "portable-lb-controller-bgp",
              items: [{ key: "password", path: "bgp/password", mode: 0o400 }],
            },
          },
        ],
      },
    });
    expect(pod.containers[0].volumeMounts).toContainEqual({
      name: "config",
      mountPath: "/etc/portable-lb",
      readOnly: true,
    });
  });

  it.each<[string, Partial<ConstructorParameters<typeof LoadBalancer>[1]>, string]>([
    [
      "more replicas than LB nodes",
      { replicas: 4, lbNodeCount: 3 },
      "loadBalancer.replicas: 4 LB pods need 4 LB nodes (one pod per node) but only 3 are labelled; label more nodes or lower replicas (got 4)",
    ],
    ["zero replicas", { replicas: 0 }, "loadBalancer.replicas: must be at least 1 (got 0)"],
    [
      "no image (no public one exists)",
      { image: undefined },
      "loadBalancer.image: is required, as no public LB image exists; build and push the LB image with 'npm run image -- --push <your-registry>/portable-lb/lb:<tag>' and set loadBalancer.image to that reference (lb-image/README.md, Building) (not set)",
    ],
    [
      "an image that is no reference",
      { image: "my image" },
      "loadBalancer.image: must be an image reference such as registry.example.com/portable-lb/lb:0.1.0; build and push",
    ],
    [
      "a password without BGP",
      { config: cloudConfig, bgpPassword: "x" },
      "loadBalancer.bgpPassword: is set but routingMode is cloud-routes; drop the password or use routingMode bgp",
    ],
    [
      "an environment's route tables for a config that names its own",
      { config: cloudConfig, routeTableIds: ["rtb-0def"] },
      "loadBalancer.routeTableIds: the environment's route tables are for cloud-routes on aws whose config names none; drop them or config.cloudRoutes.routeTableIds",
    ],
    [
      "PodMonitor labels without PodMonitors",
      { monitoring: { scrapeAnnotations: true, podMonitorLabels: { release: "kps" } } },
      "loadBalancer.monitoring.podMonitorLabels: labels PodMonitors, but podMonitors is not true; set podMonitors: true or drop the labels",
    ],
    [
      "a bad config",
      { config: { ...bgpConfig, bgp: { asn: 0, routeReflectors: ["10.0.0.5"] } } },
      "loadBalancer.config.bgp.asn: is not a usable AS number; use a private ASN in 64512-65534 or 4200000000-4294967294 (got 0)",
    ],
  ])("rejects %s", (_what, override, message) => {
    expect(
      () =>
        new LoadBalancer(`bad-${recorded.length}`, {
          image: IMAGE,
          config: bgpConfig,
          replicas: 1,
          ...override,
        }),
    ).toThrow(message);
  });
});
