// The controller's IPVS engine against real IPVS (QEMU guest): the batches it generates apply with
// `ipvsadm -R`, the kernel then shows exactly the desired state, a second generated batch (a diff)
// takes it to the next state, and traffic through each scheduler reaches the backends.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ipvsDiff } from "../../lb-image/src/dataplane/ipvs/ipvsDiff.ts";
import { formatSave, parseSave, replaceScript } from "../../lb-image/src/dataplane/ipvs/ipvsadmSave.ts";
import { parseStats } from "../../lb-image/src/dataplane/ipvs/ipvsadmStats.ts";
import { sortIpvs, toIpvs } from "../../lb-image/src/dataplane/ipvs/ipvsState.ts";
import type { VirtualService } from "../../lb-image/src/dataplane/model.ts";
import { simulate } from "../../lb-image/src/dataplane/ipvs/testing/ipvsSimulator.ts";
import { GUEST_PATHS, GUEST_TEST_DIR, runInIpvsGuest } from "../harness/qemu/ipvsGuest.ts";
import { guestTopology } from "../harness/qemu/guestTopology.ts";

const topo = guestTopology({ backends: 3 });
const [b1, b2, b3] = topo.backendIps as [string, string, string];
const svc = (
  port: number,
  scheduler: VirtualService["scheduler"],
  backends: [string, number][],
): VirtualService => ({
  vip: topo.vip,
  port,
  protocol: "tcp",
  scheduler,
  backends: backends.map(([ip, weight]) => ({ ip, port: topo.port, weight })),
});

const first: VirtualService[] = [
  svc(80, "rr", [
    [b1, 1],
    [b2, 1],
    [b3, 1],
  ]),
  svc(81, "lc", [
    [b1, 1],
    [b2, 1],
  ]),
  svc(82, "mh", [
    [b1, 1],
    [b2, 1],
    [b3, 1],
  ]),
];
// The next state: one backend drained, one removed, a scheduler changed, a service gone, one new.
const second: VirtualService[] = [
  svc(80, "rr", [
    [b1, 1],
    [b2, 0],
  ]),
  svc(81, "wrr", [
    [b1, 3],
    [b2, 1],
  ]),
  svc(83, "mh", [[b3, 1]]),
];

const batch1 = ipvsDiff([], toIpvs(first));
const batch2 = ipvsDiff(toIpvs(first), toIpvs(second));
// Drift the engine repairs: someone changes a scheduler and adds a service of their own; the
// engine's diff from what it then reads takes the kernel back. Then someone adds what the engine
// never makes (a firewall-mark service): the engine replaces everything (clear and restore).
const drifted = [
  ...toIpvs(second).map((s) => (s.port === 83 ? { ...s, scheduler: "rr", flags: [] } : s)),
  ...toIpvs([svc(90, "rr", [[b3, 1]])]).map((s) => ({ ...s, scheduler: "wlc", flags: [] })),
];
const drift = [
  `-E -t ${topo.vip}:83 -s rr`,
  ...ipvsDiff([], toIpvs([svc(90, "rr", [[b3, 1]])])).map((c) => c.replace(/-s rr$/, "-s wlc")),
];
const repairBatch = ipvsDiff(drifted, toIpvs(second));
const { ip, ipvsadm } = GUEST_PATHS;
const lb = `${ip} netns exec lb`;
const curl = (port: number, n: number) =>
  `for i in $(seq ${n}); do ${ip} netns exec client timeout 5 wget -q -O - http://${topo.vip}:${port}/ || echo "request failed"; done`;

describe("IPVS engine on a real kernel (QEMU guest)", () => {
  let output = "";
  beforeAll(async () => {
    const script = [
      topo.script,
      `${lb} ${ipvsadm} -R < ${GUEST_TEST_DIR}/batch1`,
      `echo "== save1"; ${lb} ${ipvsadm} -S -n; echo "== end"`,
      `echo "== traffic"; ${curl(80, 9)}; ${curl(81, 4)}; ${curl(82, 6)}; echo "== end"`,
      // The kernel folds its per-CPU counters into what ipvsadm reads every 2 s (the estimator).
      `sleep 5; echo "== stats"; ${lb} ${ipvsadm} -L -n --stats --exact; echo "== end"`,
      `${lb} ${ipvsadm} -R < ${GUEST_TEST_DIR}/batch2`,
      `echo "== save2"; ${lb} ${ipvsadm} -S -n; echo "== end"`,
      `echo "== list"; ${lb} ${ipvsadm} -L -n; echo "== end"`,
      `${lb} ${ipvsadm} -R < ${GUEST_TEST_DIR}/drift`,
      `echo "== drifted"; ${lb} ${ipvsadm} -S -n; echo "== end"`,
      `${lb} ${ipvsadm} -R < ${GUEST_TEST_DIR}/repair`,
      `echo "== repaired"; ${lb} ${ipvsadm} -S -n; echo "== end"`,
      `${lb} ${ipvsadm} -A -f 7 -s rr`,
      `${lb} ${ipvsadm} -R < ${GUEST_TEST_DIR}/replace`,
      `echo "== replaced"; ${lb} ${ipvsadm} -S -n; echo "== end"`,
    ].join("\n");
    const result = await runInIpvsGuest({
      script,
      files: {
        batch1: batch1.join("\n") + "\n",
        batch2: batch2.join("\n") + "\n",
        drift: drift.join("\n") + "\n",
        repair: repairBatch.join("\n") + "\n",
        replace: replaceScript(toIpvs(second)),
      },
      timeoutMs: 180_000,
    });
    expect(result.exitCode).toBe(0);
    output = result.output;
  });
  const section = (name: string) => output.split(`== ${name}\n`)[1]!.split("== end")[0]!;

  it("applies a generated batch: the kernel then holds exactly the desired state", () => {
    expect(parseSave(section("save1"))).toEqual(toIpvs(first));
  });

  it("applies a generated diff: the kernel matches the desired state and the pure simulator", () => {
    expect(parseSave(section("save2"))).toEqual(toIpvs(second));
    expect(simulate(toIpvs(first), batch2)).toEqual(parseSave(section("save2")));
  });

  it("serves traffic through rr, lc and mh in NAT mode", () => {
    const pages = section("traffic").trim().split("\n");
    expect(pages.filter((p) => p.includes("failed"))).toEqual([]);
    expect(pages).toHaveLength(19);
    // rr over three backends: the first nine requests hit each backend three times.
    for (const b of [b1, b2, b3]) expect(pages.slice(0, 9).filter((p) => p.includes(b))).toHaveLength(3);
    // lc counts inactive (TIME_WAIT) connections too, so sequential requests alternate over both.
    for (const b of [b1, b2]) expect(pages.slice(9, 13).some((p) => p.includes(b))).toBe(true);
    // mh: every answer comes from one of its three backends.
    for (const p of pages.slice(13)) expect([b1, b2, b3].some((b) => p.includes(b))).toBe(true);
  });

  it("counts each service's connections in the kernel's stats, as the metrics read them", () => {
    expect(parseStats(section("stats"))).toEqual(
      [80, 81, 82].map((port, i) => ({
        protocol: "tcp",
        vip: topo.vip,
        port,
        connections: [9, 4, 6][i],
      })),
    );
  });

  it("repairs drift as the engine does: by diff from what it reads, and by clear and restore", () => {
    expect(parseSave(section("drifted"))).toEqual(sortIpvs(drifted));
    expect(parseSave(section("repaired"))).toEqual(toIpvs(second));
    expect(parseSave(section("replaced"))).toEqual(toIpvs(second));
  });

  it("shows the drained backend with weight 0 and the new scheduler in ipvsadm -Ln", () => {
    const list = section("list");
    expect(list).toMatch(new RegExp(`TCP\\s+${topo.vip.replace(/\./g, "\\.")}:81 wrr`));
    expect(list).toMatch(new RegExp(`-> ${b2.replace(/\./g, "\\.")}:${topo.port}\\s+Masq\\s+0`));
  });
});

describe("ipvsadm -Sn parser against the guest's real output", () => {
  const fixture = readFileSync(join(__dirname, "../fixtures/ipvsadm-Sn.txt"), "utf8");
  it("parses every service, scheduler, flag and weight, and formats the same text back", () => {
    const parsed = parseSave(fixture);
    expect(parsed).toHaveLength(5);
    expect(parsed.find((s) => s.scheduler === "mh")).toMatchObject({
      flags: ["mh-fallback", "mh-port"],
      port: 80,
    });
    expect(parsed.find((s) => s.protocol === "udp")).toMatchObject({ port: 53, scheduler: "rr" });
    expect(formatSave(parsed)).toBe(fixture);
  });
});
