// The cloud machines' metadata guard (packages/providers/src/bootstrap/metadataGuard.ts) for real: its
// nft file loaded into a node namespace that forwards for a pod namespace behind it, with an instance
// metadata service at its address in a namespace of its own (an HTTP server on 80, DNS on 53 over TCP
// and UDP). The pod reaches DNS but not the HTTP API, unless its address is in the set the node agent
// keeps for LB pods in the cloud-routes mode; the node itself still reaches both; loading the file
// again replaces the table. Its systemd unit passes systemd's own checker.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { NetnsLab, execCommand, waitUntil, type LabNamespace } from "@portable-lb/lab";
import { INSTANCE_METADATA_ADDRESS as METADATA, METADATA_GUARD } from "@portable-lb/core";
import { metadataGuardRules, metadataGuardUnit } from "@portable-lb/providers";
import { getInside, startHttpEcho } from "../harness/netns/httpClient.ts";

// A UDP responder and a one-shot UDP query, in whichever namespace they are started.
const UDP_ECHO = `const s=require("dgram").createSocket("udp4");s.on("message",(m,r)=>s.send(m,r.port,r.address));s.bind(53,"${METADATA}",()=>console.log("udp 53"))`;
const UDP_ASK = `const s=require("dgram").createSocket("udp4");const t=setTimeout(()=>process.exit(1),2000);s.on("message",()=>{clearTimeout(t);process.exit(0)});s.send("hi",53,"${METADATA}")`;

let lab: NetnsLab;
let node: LabNamespace;
let pod: LabNamespace;
let dir: string;

const reaches = (ns: LabNamespace, port: number) =>
  getInside(ns, port, "/", { host: METADATA, timeoutMs: 2_000 }).then(
    () => true,
    () => false,
  );
const asksDns = async (ns: LabNamespace) =>
  (await ns.exec(process.execPath, ["-e", UDP_ASK], { timeoutMs: 10_000 })).code === 0;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "plb-mdguard-"));
  lab = await NetnsLab.create("mdguard");
  node = await lab.namespace("node");
  pod = await lab.namespace("pod");
  const metadata = await lab.namespace("metadata");
  await lab.link(node, pod, { a: "10.244.1.1/24", b: "10.244.1.2/24" });
  await pod.route("default", "10.244.1.1");
  await lab.link(node, metadata, { a: "10.0.0.1/24", b: "10.0.0.2/24" });
  await metadata.addAddress(`${METADATA}/32`, "lo");
  await metadata.route("default", "10.0.0.1");
  await node.route(`${METADATA}/32`, "10.0.0.2");
  await node.sysctl("net.ipv4.ip_forward", "1");
  await startHttpEcho(metadata, { host: METADATA, port: 80 });
  await startHttpEcho(metadata, { host: METADATA, port: 53 });
  await metadata.spawn("udp-53", process.execPath, ["-e", UDP_ECHO], { marker: "udp4" });
  // The UDP responder has no listener to wait for: it is there once it answers.
  await waitUntil(() => asksDns(node), 10_000, 200);
  // Before the guard, the pod reaches all of it: the test's network is not what blocks it.
  expect([await reaches(pod, 80), await reaches(pod, 53), await asksDns(pod)]).toEqual([true, true, true]);
}, 60_000);

afterAll(async () => {
  await lab?.destroy();
  rmSync(dir, { recursive: true, force: true });
});

describe("the metadata guard of cloud machines", () => {
  const load = async () => {
    const file = join(dir, "metadata-guard.nft");
    writeFileSync(file, metadataGuardRules());
    const r = await node.exec("nft", ["-f", file]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
  };

  it("keeps a pod from the metadata service's HTTP API, and lets its DNS through", async () => {
    await load();
    expect(await reaches(pod, 80)).toBe(false);
    expect(await reaches(pod, 53)).toBe(true);
    expect(await asksDns(pod)).toBe(true);
    // Dropped by the guard, not lost on the way: its counter saw the packets.
    const table = await node.run("nft", ["list", "table", "inet", METADATA_GUARD.table]);
    expect(table).toMatch(/counter packets [1-9]\d* bytes \d+ drop/);
  }, 30_000);

  it("lets through an address in its LB pod set (the node agent's, cloud-routes mode), and only while it is there", async () => {
    const element = (op: "add" | "delete") =>
      node.run("nft", [
        op,
        "element",
        "inet",
        METADATA_GUARD.table,
        METADATA_GUARD.lbPodsSet,
        "{ 10.244.1.2 }",
      ]);
    await element("add");
    expect(await reaches(pod, 80)).toBe(true);
    await element("delete");
    expect(await reaches(pod, 80)).toBe(false);
  }, 30_000);

  it("leaves the node itself (the kubelet, host-network pods) its metadata", async () => {
    expect(await reaches(node, 80)).toBe(true);
  }, 15_000);

  it("replaces its table when loaded again (every boot, every run of the script)", async () => {
    await load();
    const tables = await node.run("nft", ["list", "tables"]);
    expect(tables.split("\n").filter((l) => l.includes(METADATA_GUARD.table))).toHaveLength(1);
    expect(await reaches(pod, 80)).toBe(false);
  }, 30_000);

  it("loads at boot through a unit systemd's checker accepts", async () => {
    const unit = join(dir, "portable-lb-metadata-guard.service");
    writeFileSync(unit, metadataGuardUnit());
    const r = await execCommand("systemd-analyze", ["verify", unit], { timeoutMs: 20_000 });
    expect(r.stderr.trim()).toBe("");
    expect(r.code).toBe(0);
  }, 30_000);
});
