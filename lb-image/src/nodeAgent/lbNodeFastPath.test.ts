import pino from "pino";
import { Registry } from "prom-client";
import type { NodeFastPath, NodeFastPathPod } from "../dataplane/fastpath/nodeFastPath.ts";
import { LbNodeFastPath } from "./lbNodeFastPath.ts";

const log = pino({ level: "silent" });

/** A node loader as the agent sees one: what it was told. */
class NodeLoaderDouble {
  readonly calls: string[] = [];
  skipped: string[] = [];
  drift: string[] = [];
  exit: ((error: Error) => void) | undefined;
  closed = false;
  sync(uplinks: string[], pools: string[], pods: NodeFastPathPod[]) {
    this.calls.push(
      `sync ${uplinks.join(",")} ${pools.join(",")} ${pods.map((p) => `${p.ip}@${p.ifindex}`).join(",")}`,
    );
    return Promise.resolve({ changes: 1, skipped: this.skipped });
  }
  check() {
    this.calls.push("check");
    return Promise.resolve({ drift: this.drift, skipped: this.skipped });
  }
  stats() {
    return Promise.resolve({ to_pod: 7, from_pod: 6 });
  }
  onExit(cb: (error: Error) => void) {
    this.exit = cb;
  }
  close() {
    this.closed = true;
    return Promise.resolve();
  }
}

function rig(veths: Record<string, number>) {
  const loaders: NodeLoaderDouble[] = [];
  const registry = new Registry();
  const fast = new LbNodeFastPath({
    start: () =>
      Promise.resolve(loaders[loaders.push(new NodeLoaderDouble()) - 1] as unknown as NodeFastPath),
    peerIfindex: (ip) => Promise.resolve(veths[ip]),
    uplink: () => Promise.resolve("eth0"),
    pools: ["10.1.1.0/24"],
    log,
    registry,
    retryMs: { first: 20, max: 40 },
  });
  const metric = async (name: string) => (await registry.getSingleMetric(name)!.get()).values;
  return { fast, loaders, metric };
}

const waitFor = async (what: () => boolean) => {
  for (let i = 0; i < 100 && !what(); i++) await new Promise((r) => setTimeout(r, 10));
  expect(what()).toBe(true);
};

describe("the LB node's fast path, as the node agent runs it", () => {
  it("starts its loader only with the first LB pod, and gives it the uplink, the pools and the pods' veths", async () => {
    const r = rig({ "10.244.0.2": 4, "10.244.0.3": 9 });
    r.fast.update([]);
    await new Promise((res) => setTimeout(res, 30));
    expect(r.loaders).toHaveLength(0); // a node without LB pods runs nothing
    r.fast.update(["10.244.0.3", "10.244.0.2", "10.244.0.3"]);
    await waitFor(() => r.loaders[0]?.calls.length === 1);
    expect(r.loaders[0]!.calls).toEqual(["sync eth0 10.1.1.0/24 10.244.0.2@4,10.244.0.3@9"]);
    expect((await r.metric("portable_lb_node_fast_path_up"))[0]!.value).toBe(1);
    const packets = await r.metric("portable_lb_node_fast_path_packets_total");
    expect(packets.map((v) => [v.labels.result, v.value])).toEqual([
      ["to_pod", 7],
      ["from_pod", 6],
    ]);
    // Nothing new: a check. The pods gone: nothing on the uplink either.
    r.fast.check();
    await waitFor(() => r.loaders[0]!.calls.length === 2);
    expect(r.loaders[0]!.calls[1]).toBe("check");
    r.fast.update([]);
    await waitFor(() => r.loaders[0]!.calls.length === 3);
    expect(r.loaders[0]!.calls[2]).toBe("sync  10.1.1.0/24 ");
    await r.fast.stop();
    expect(r.loaders[0]!.closed).toBe(true);
  });

  it("counts the pods it could not find or attach to, and restarts a loader that died", async () => {
    const r = rig({ "10.244.0.2": 4 });
    r.fast.update(["10.244.0.2", "10.244.0.8"]);
    await waitFor(() => r.loaders[0]?.calls.length === 1);
    expect(r.loaders[0]!.calls).toEqual(["sync eth0 10.1.1.0/24 10.244.0.2@4"]);
    await waitFor(() => r.loaders[0]!.calls.length === 1);
    expect((await r.metric("portable_lb_node_fast_path_skipped_pods"))[0]!.value).toBe(1);
    r.loaders[0]!.exit!(new Error("killed"));
    expect((await r.metric("portable_lb_node_fast_path_up"))[0]!.value).toBe(0);
    // The new loader gets the same pods at once, without a change to wait for.
    await waitFor(() => r.loaders[1]?.calls.length === 1);
    expect(r.loaders[1]!.calls).toEqual(["sync eth0 10.1.1.0/24 10.244.0.2@4"]);
    expect((await r.metric("portable_lb_node_fast_path_up"))[0]!.value).toBe(1);
    await r.fast.stop();
  });
});
