// Moves an app stack from one platform to another through Pulumi's Automation API, in the order a
// careful operator follows by hand (README.md, "Migrating an app"): bring the app up on the target
// platform, check the target's VIP answers, move the traffic, and only then take the app off the
// source. Everything is checked before anything changes, so bad input fails with nothing touched.
//
// Traffic moves one of two ways:
// - "dns": a new VIP on the target (between clouds, where addresses cannot move); the app's DNS name
//   is pointed at it, and the source goes only after the record's TTL, when no resolver can still
//   hand out the old address;
// - "bgp": the same VIP (between sites on one routed network): the target's LB pods announce the
//   source's VIP too, the router spreads over both, then the source stops announcing and goes.
//   The router's ECMP moves open connections between the platforms whenever its set of next hops
//   changes, so the target's LB pods hand the flows they did not see start over to the source's LB
//   nodes (a handover, lb-image/src/controller/handover.ts): all of them while both announce, then
//   only connections that began before the source withdrew, until the source is gone.
import { LocalWorkspace, Stack, type ConfigMap } from "@pulumi/pulumi/automation/index.js";
import { setTimeout as sleep } from "node:timers/promises";
import { cidrContains } from "@portable-lb/core";
import type { DnsRecord } from "./dnsRecord.ts";
import { lbPods, type LbPods } from "./lbNodes.ts";

export type TrafficMove =
  | { kind: "dns"; record: DnsRecord }
  | {
      kind: "bgp";
      /** Seconds for the source's withdrawal to reach the router (default 5). */
      settleSeconds?: number;
      /** Seconds the source keeps serving connections begun on it, once withdrawn (default 10). */
      drainSeconds?: number;
    };

export interface MigrationOptions {
  /** The app stack's program folder (its Pulumi.yaml names the project, e.g. "shop"). */
  appDir: string;
  /** The app stack serving now. */
  from: string;
  /** The app stack to create on the target platform (it may exist from an interrupted run). */
  to: string;
  /** The target platform stack, as the app's `platform` setting names it (organization/<project>/<stack>). */
  toPlatform: string;
  way: TrafficMove;
  /** Throws unless `url` is served (from where the app's clients are). */
  verify: (url: string) => Promise<void>;
  /**
   * How long the target's VIP may take to answer after its up (the up ends once the address is in
   * the Service's status; the route to it spreads after): verify is retried until then. Default 60.
   */
  verifySeconds?: number;
  /** The engine's environment (backend URL, passphrase); default this process's. */
  envVars?: Record<string, string>;
  log?: (line: string) => void;
}

export interface MigrationResult {
  fromVip: string;
  toVip: string;
  /** Seconds each step took. */
  steps: Record<"check" | "upTarget" | "verify" | "moveTraffic" | "removeSource", number>;
}

/** A migration's input that cannot work; names the setting and the fix. */
export class MigrationError extends Error {
  override name = "MigrationError";
}

interface Checked {
  source: Stack;
  sourceVip: string;
  targetConfig: ConfigMap;
  /** By BGP: each platform's LB pods (the handover's ends). */
  lbNodes?: { source: LbPods; target: LbPods };
}

export async function migrate(o: MigrationOptions): Promise<MigrationResult> {
  const log = o.log ?? (() => undefined);
  const steps = {} as MigrationResult["steps"];
  const timed = async <T>(step: keyof MigrationResult["steps"], what: string, f: () => Promise<T>) => {
    const started = Date.now();
    log(`${step}: ${what}`);
    const result = await f();
    steps[step] = (Date.now() - started) / 1000;
    return result;
  };
  const ws = await LocalWorkspace.create({ workDir: o.appDir, ...(o.envVars && { envVars: o.envVars }) });
  const project = (await ws.projectSettings()).name;
  const c = await timed("check", "the stacks, platforms and pools", () => check(ws, project, o));

  // One workspace for every stack of the app's project: each command names its stack.
  const target = await Stack.createOrSelect(o.to, ws);
  const handover = (stack: Stack, value: object | undefined) =>
    value
      ? stack.setConfig(`${project}:handover`, { value: JSON.stringify(value) })
      : stack.removeConfig(`${project}:handover`);
  const up = async (stack: Stack) => (await stack.up({ color: "never" })).outputs;
  const toVip = await timed("upTarget", `${o.to} on ${o.toPlatform}`, async () => {
    if (c.lbNodes) {
      // The source takes the flows the target's LB nodes will relay to it, before any can come.
      await handover(c.source, { acceptFrom: [...c.lbNodes.target.nodes, ...c.lbNodes.target.pods] });
      await up(c.source);
    }
    await target.setAllConfig(c.targetConfig);
    return String((await up(target)).vip?.value ?? "");
  });
  if (!toVip) throw new MigrationError(`${o.to}: the app stack has no "vip" output after its up`);
  await timed("verify", `http://${toVip}/`, () =>
    verifyWithin(o.verify, `http://${toVip}/`, o.verifySeconds ?? 60),
  );

  await timed(
    "moveTraffic",
    o.way.kind === "dns" ? `${o.way.record.name} -> ${toVip}` : "withdraw the source",
    async () => {
      if (o.way.kind === "dns") {
        await o.way.record.point(toVip);
        const answers = await o.way.record.addresses();
        if (answers.join() !== toVip)
          throw new MigrationError(
            `dns: ${o.way.record.name} answers ${answers.join(", ") || "nothing"} after the update, not ${toVip}; check the server takes the key's updates`,
          );
        // Resolvers may hand out the old address until it expires; one second more for clock edges.
        await sleep((o.way.record.ttlSeconds + 1) * 1000);
      } else {
        // The target announces the VIP already (its up); the source stops, and its LB pods keep the
        // rules for connections the router still sends them until the withdrawal has spread.
        await c.source.setConfig(`${project}:announce`, { value: "false" });
        await up(c.source);
        await sleep((o.way.settleSeconds ?? 5) * 1000);
        // The router's next hops are the target's alone from now on: new connections are the
        // target's, and only those begun before still go to the source.
        await handover(target, { from: c.lbNodes!.source.nodes, relay: "established" });
        await up(target);
        await sleep((o.way.drainSeconds ?? 10) * 1000);
      }
      await o.verify(`http://${toVip}/`);
    },
  );

  await timed("removeSource", o.from, async () => {
    await c.source.destroy({ color: "never" });
    await ws.removeStack(o.from);
    // Nothing is left to hand over to.
    if (c.lbNodes) {
      await handover(target, undefined);
      await up(target);
    }
  });
  return { fromVip: c.sourceVip, toVip, steps };
}

/** `verify(url)` until it passes, or its last failure once `seconds` have passed. */
async function verifyWithin(
  verify: (url: string) => Promise<void>,
  url: string,
  seconds: number,
): Promise<void> {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    try {
      return await verify(url);
    } catch (err) {
      if (Date.now() >= deadline) throw err;
      await sleep(1000);
    }
  }
}

/** Everything a migration relies on, read and checked before it changes anything. */
async function check(ws: LocalWorkspace, project: string, o: MigrationOptions): Promise<Checked> {
  const key = (k: string) => `${project}:${k}`;
  const stacks = (await ws.listStacks()).map((s) => s.name);
  if (!stacks.includes(o.from))
    throw new MigrationError(
      `from: there is no app stack "${o.from}" in project ${project} (its stacks: ${stacks.join(", ") || "none"}); name the stack that serves now`,
    );
  if (o.from === o.to)
    throw new MigrationError(
      `to: "${o.to}" is the source stack itself; name a new stack for the target platform`,
    );
  const sourceConfig = await ws.getAllConfig(o.from);
  const fromPlatform = sourceConfig[key("platform")]?.value;
  if (fromPlatform === o.toPlatform)
    throw new MigrationError(
      `toPlatform: "${o.toPlatform}" is the platform ${o.from} runs on already; name the other platform`,
    );
  if (stacks.includes(o.to)) {
    const existing = (await ws.getAllConfig(o.to))[key("platform")]?.value;
    if (existing !== o.toPlatform)
      throw new MigrationError(
        `to: the stack "${o.to}" exists on platform ${existing ?? "(none)"}, not ${o.toPlatform}; name a new stack or remove it`,
      );
  }
  const outputs = await platformOutputs(ws, o.toPlatform);
  const sourceOutputs = o.way.kind === "bgp" ? await platformOutputs(ws, fromPlatform ?? "") : undefined;
  const sourceVip = String((await ws.stackOutputs(o.from)).vip?.value ?? "");
  if (!sourceVip) throw new MigrationError(`from: ${o.from} has no "vip" output; is it up (pulumi up)?`);
  const pools = outputs.vipPools;
  const targetConfig: ConfigMap = { ...sourceConfig, [key("platform")]: { value: o.toPlatform } };
  delete targetConfig[key("announce")];
  delete targetConfig[key("handover")];
  if (o.way.kind === "dns") {
    const pool = sourceConfig[key("pool")]?.value ?? "web";
    if (!pools.some((p) => p.name === pool))
      throw new MigrationError(
        `pool: the target platform ${o.toPlatform} has no VIP pool "${pool}" (its pools: ${pools.map((p) => p.name).join(", ")}); add it to its network.vipPools or set the app's pool`,
      );
    delete targetConfig[key("vip")];
  } else {
    if (!pools.some((p) => cidrContains(p.cidr, sourceVip)))
      throw new MigrationError(
        `vip: the target platform ${o.toPlatform} has no VIP pool holding ${sourceVip} (its pools: ${pools.map((p) => `${p.name} ${p.cidr}`).join(", ")}); add a pool with it to its network.vipPools, or migrate by dns`,
      );
    targetConfig[key("vip")] = { value: sourceVip };
    delete targetConfig[key("pool")];
    const lbNodes = {
      source: await lbNodesOf(fromPlatform!, sourceOutputs!),
      target: await lbNodesOf(o.toPlatform, outputs),
    };
    // While both announce, the target's LB pods relay every flow they did not see start.
    targetConfig[key("handover")] = { value: JSON.stringify({ from: lbNodes.source.nodes, relay: "all" }) };
    return { source: await Stack.select(o.from, ws), sourceVip, targetConfig, lbNodes };
  }
  return { source: await Stack.select(o.from, ws), sourceVip, targetConfig };
}

interface PlatformOutputs {
  vipPools: { name: string; cidr: string }[];
  kubeconfig: string;
}

/** A platform's LB pods, from its cluster; a platform without any cannot hand over. */
async function lbNodesOf(platform: string, outputs: PlatformOutputs): Promise<LbPods> {
  let nodes: LbPods;
  try {
    nodes = await lbPods(outputs.kubeconfig);
  } catch (err) {
    throw new MigrationError(
      `${platform}: cannot list its LB pods (${firstLine(err)}); is its cluster up and its kubeconfig output current?`,
    );
  }
  if (nodes.nodes.length === 0)
    throw new MigrationError(`${platform}: no LB pod runs on its cluster; bring the platform up first`);
  return nodes;
}

async function platformOutputs(ws: LocalWorkspace, platform: string): Promise<PlatformOutputs> {
  let outputs: Record<string, { value: unknown }>;
  try {
    outputs = await ws.stackOutputs(platform);
  } catch (err) {
    throw new MigrationError(
      `toPlatform: cannot read the platform stack "${platform}" (${firstLine(err)}); bring it up first or fix its name (organization/<project>/<stack>)`,
    );
  }
  const pools = outputs.vipPools?.value;
  if (!Array.isArray(pools) || outputs.kubeconfig === undefined)
    throw new MigrationError(
      `toPlatform: "${platform}" has no vipPools or kubeconfig output; is it a portable-lb platform stack, and up?`,
    );
  const kubeconfig = outputs.kubeconfig.value;
  return {
    vipPools: pools as PlatformOutputs["vipPools"],
    kubeconfig: typeof kubeconfig === "string" ? kubeconfig : JSON.stringify(kubeconfig),
  };
}

function firstLine(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  return (
    text
      .split("\n")
      .find((l) => /error/i.test(l))
      ?.trim() ?? text.split("\n")[0]!
  );
}
