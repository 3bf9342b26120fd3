// portable-lb's components as Pulumi packages them for other languages: the schema the real CLI
// reads from the plugin (packages/component-provider, run by `pulumi package get-schema`), and the
// Python SDK generated from it and installed with pip, as the Python app stack imports it.
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { installPythonSdk, type PythonSdk } from "../harness/pythonSdk.ts";
import { pythonVenv } from "../harness/pythonRuntime.ts";

const run = promisify(execFile);
const TOKEN = "portable-lb:index:LoadBalancerService";

interface PropertySpec {
  type?: string;
  $ref?: string;
  plain?: boolean;
  items?: PropertySpec;
  additionalProperties?: PropertySpec;
}

let sdk: PythonSdk;
let schema: {
  name: string;
  version: string;
  resources: Record<
    string,
    {
      isComponent: boolean;
      inputProperties: Record<string, PropertySpec>;
      requiredInputs: string[];
      properties: Record<string, PropertySpec>;
      required: string[];
    }
  >;
  types: Record<
    string,
    { enum?: { value: string }[]; properties?: Record<string, PropertySpec>; required?: string[] }
  >;
};

beforeAll(async () => {
  const started = Date.now();
  sdk = await installPythonSdk(pythonVenv());
  const { stdout } = await run(
    "pulumi",
    ["package", "get-schema", join(sdk.plugin, "pulumi-resource-portable-lb")],
    {
      timeout: 120_000,
    },
  );
  schema = JSON.parse(stdout) as typeof schema;
  console.log(`Python SDK made and the schema read again in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}, 300_000);

afterAll(async () => {
  await sdk?.dispose();
});

/** Runs `code` in the venv's Python with the SDK installed; its stdout as JSON. */
async function inPython(code: string): Promise<unknown> {
  const { stdout } = await run(join(pythonVenv(), "bin/python"), ["-c", code], {
    env: { ...process.env, PYTHONPATH: sdk.site },
    timeout: 60_000,
  });
  return JSON.parse(stdout);
}

describe("portable-lb's Pulumi package", () => {
  it("is named portable-lb and serves LoadBalancerService as a component, its args typed from TypeScript", () => {
    expect({ name: schema.name, version: schema.version, resources: Object.keys(schema.resources) }).toEqual({
      name: "portable-lb",
      version: "0.1.0",
      resources: [TOKEN],
    });
    const lbs = schema.resources[TOKEN]!;
    expect(lbs.isComponent).toBe(true);
    expect(lbs.requiredInputs).toEqual(["name", "namespace", "ports", "selector", "vipPools"]);
    // The namespace may be another resource's output; the rest are plain, so core checks them at preview.
    const plain = Object.entries(lbs.inputProperties)
      .filter(([, p]) => p.plain)
      .map(([k]) => k)
      .sort();
    expect(plain).toEqual([
      "announce",
      "externalTrafficPolicy",
      "handover",
      "loadBalancerClass",
      "name",
      "pool",
      "ports",
      "selector",
      "sourceRanges",
      "vipPools",
      "vips",
    ]);
    expect(lbs.inputProperties.namespace).toMatchObject({ type: "string" });
    expect(lbs.inputProperties.ports).toMatchObject({
      type: "array",
      items: { $ref: "#/types/portable-lb:index:ServicePort" },
    });
    expect(lbs.inputProperties.selector).toMatchObject({
      type: "object",
      additionalProperties: { type: "string" },
    });
    expect(lbs.properties).toEqual({
      ingress: expect.objectContaining({ type: "array", items: { type: "string" } }) as unknown,
    });
    expect(lbs.required).toEqual(["ingress"]);
  });

  it("types the nested args: ports, pools, handover, and the traffic policy and relay as enums", () => {
    const t = schema.types;
    expect(Object.keys(t).sort()).toEqual(
      ["ExternalTrafficPolicy", "Handover", "HandoverRelay", "ServicePort", "VipPool"].map(
        (n) => `portable-lb:index:${n}`,
      ),
    );
    expect(t["portable-lb:index:ExternalTrafficPolicy"]!.enum!.map((e) => e.value)).toEqual([
      "Cluster",
      "Local",
    ]);
    expect(t["portable-lb:index:ServicePort"]).toMatchObject({
      properties: {
        name: { type: "string" },
        port: { type: "number" },
        targetPort: { type: "number" },
        protocol: { type: "string" },
      },
      required: ["port"],
    });
    expect(t["portable-lb:index:VipPool"]!.required).toEqual(["cidr", "name"]);
    expect(Object.keys(t["portable-lb:index:Handover"]!.properties!).sort()).toEqual([
      "acceptFrom",
      "from",
      "relay",
    ]);
  });

  it("generates a Python SDK whose classes take those args by their Python names", async () => {
    const api = await inPython(`
import inspect, json
import pulumi_portable_lb as plb
def params(f): return [p for p in inspect.signature(f).parameters if p not in ("self", "__self__")]
print(json.dumps({
  "version": plb._utilities.get_version(),
  "component": params(plb.LoadBalancerService._internal_init),
  "args": params(plb.LoadBalancerServiceArgs.__init__),
  "port": params(plb.ServicePortArgs.__init__),
  "pool": params(plb.VipPoolArgs.__init__),
  "handover": params(plb.HandoverArgs.__init__),
  "policy": [p.value for p in plb.ExternalTrafficPolicy],
  "relay": [p.value for p in plb.HandoverRelay],
  "remote": "remote=True" in inspect.getsource(plb.LoadBalancerService._internal_init),
}))
`);
    expect(api).toEqual({
      version: "0.1.0",
      component: [
        "resource_name",
        "opts",
        "announce",
        "external_traffic_policy",
        "handover",
        "load_balancer_class",
        "name",
        "namespace",
        "pool",
        "ports",
        "selector",
        "source_ranges",
        "vip_pools",
        "vips",
        "__props__",
      ],
      args: [
        "name",
        "namespace",
        "ports",
        "selector",
        "vip_pools",
        "announce",
        "external_traffic_policy",
        "handover",
        "load_balancer_class",
        "pool",
        "source_ranges",
        "vips",
      ],
      port: ["port", "name", "protocol", "target_port"],
      pool: ["cidr", "name", "auto_assign", "avoid_buggy_ips"],
      handover: ["accept_from", "from_", "relay"],
      policy: ["Cluster", "Local"],
      relay: ["all", "established"],
      // Construction happens in the plugin (the engine's Construct), not in Python.
      remote: true,
    });
  });
});
