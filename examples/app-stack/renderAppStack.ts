// The app stack (index.ts) run under Pulumi's mocks against one platform stack's outputs (its
// StackReference answers with them): every object it registers, with each value the platform
// handed in replaced by a placeholder naming it. Renders against two platforms are then equal
// exactly when the app's objects do not depend on where it runs.
import * as pulumi from "@pulumi/pulumi";
import type { OutputMap } from "@pulumi/pulumi/automation/index.js";
import type { VipPool } from "@portable-lb/core";
import { installMocks, secretValue, settled } from "../../test/unit/pulumiMocks.ts";

/** The app's project (its Pulumi.yaml), which namespaces its settings. */
const PROJECT = "shop";
/** What the app's `platform` setting names: one stack name for every render, so it never differs. */
const PLATFORM_STACK = "organization/portable-lb/platform";
/** The app's settings besides `platform`: its one required one, the others at their defaults. */
const APP_SETTINGS = { image: "registry.example.com/shop/web:1" };

/** One object the app registered; a secret input reads `{ secret: <its value> }`. */
export interface RenderedObject {
  type: string;
  name: string;
  inputs: Record<string, unknown>;
  /** The explicit provider's reference ("urn::id"), which says which cluster the object goes to. */
  provider?: string;
}

/**
 * The outputs the app takes from its platform, each value by the placeholder it renders as. A pool's
 * name stays: the app names the pool it wants itself (its `pool` setting); its range is the platform's.
 */
const PLATFORM_INPUTS: Record<string, (value: unknown) => [string, string][]> = {
  kubeconfig: (value) => [[value as string, "<platform kubeconfig>"]],
  loadBalancerClass: (value) => [[value as string, "<platform loadBalancerClass>"]],
  vipPools: (value) => (value as VipPool[]).map((p) => [p.cidr, `<platform vipPools.${p.name}.cidr>`]),
};

/**
 * Renders the app against `platform` (a platform stack's outputs, as the Automation API's
 * `stack.outputs()` gives them), sorted by type and name. Throws what the app throws, and when the
 * app reads a platform output this file has no placeholder for.
 */
export async function renderAppStack(platform: OutputMap): Promise<RenderedObject[]> {
  const recorded = installMocks(
    {
      // The engine answers a StackReference with the stack's outputs and names the secret ones.
      outputs: (type) =>
        type === "pulumi:pulumi:StackReference"
          ? {
              outputs: Object.fromEntries(Object.entries(platform).map(([k, o]) => [k, o.value as unknown])),
              secretOutputNames: Object.keys(platform).filter((k) => platform[k]!.secret),
            }
          : undefined,
    },
    PROJECT,
  );
  pulumi.runtime.setAllConfig(
    Object.fromEntries(
      Object.entries({ ...APP_SETTINGS, platform: PLATFORM_STACK }).map(([k, v]) => [`${PROJECT}:${k}`, v]),
    ),
  );
  const read = await readingPlatform(async () => {
    // The program as the engine loads it (module.exports = main).
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- the program's own export form
    const main = require("./index.ts") as () => Promise<unknown>;
    try {
      await main();
    } finally {
      // Nothing of this render may reach the next one's mocks.
      await settled();
    }
  });
  const untaken = [...read].filter((name) => !(name in PLATFORM_INPUTS));
  if (untaken.length)
    throw new Error(
      `the app reads the platform's ${untaken.join(", ")}, which renderAppStack has no placeholder for; add it to PLATFORM_INPUTS`,
    );

  const placeholders = new Map(
    Object.entries(PLATFORM_INPUTS).flatMap(([name, of]) =>
      platform[name] === undefined ? [] : of(platform[name].value),
    ),
  );
  return recorded
    .map((r) => ({
      type: r.type,
      name: r.name,
      inputs: withPlaceholders(r.inputs, placeholders) as Record<string, unknown>,
      ...(r.provider && { provider: r.provider }),
    }))
    .sort((a, b) => `${a.type}::${a.name}`.localeCompare(`${b.type}::${b.name}`));
}

/** The names of the platform outputs `run` reads through any StackReference. */
async function readingPlatform(run: () => Promise<void>): Promise<Set<string>> {
  const read = new Set<string>();
  type Read = (this: pulumi.StackReference, name: pulumi.Input<string>) => pulumi.Output<unknown>;
  const proto = pulumi.StackReference.prototype as unknown as Record<string, Read>;
  // requireOutputValue and getOutputDetails read through these two.
  const originals = { getOutput: proto.getOutput!, requireOutput: proto.requireOutput! };
  for (const [method, original] of Object.entries(originals))
    proto[method] = function (name) {
      read.add(typeof name === "string" ? name : "<an output>");
      return original.call(this, name);
    };
  try {
    await run();
  } finally {
    Object.assign(proto, originals);
  }
  return read;
}

/** `value` with every string the platform handed in replaced by its placeholder, secrets marked. */
function withPlaceholders(value: unknown, placeholders: Map<string, string>): unknown {
  const secret = secretValue(value);
  if (secret !== undefined) return { secret: withPlaceholders(secret, placeholders) };
  if (typeof value === "string") return placeholders.get(value) ?? value;
  if (Array.isArray(value)) return value.map((v) => withPlaceholders(v, placeholders));
  if (value !== null && typeof value === "object")
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, withPlaceholders(v, placeholders)]));
  return value;
}
