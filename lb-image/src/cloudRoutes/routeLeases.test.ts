import type { V1Lease } from "@kubernetes/client-node";
import {
  GROUP_LABEL,
  INSTANCE_ANNOTATION,
  NODE_ANNOTATION,
  TARGET_ANNOTATION,
  ROLE_LABEL,
  leaseStateKey,
  liveMembers,
  memberLeaseName,
  nextExpiry,
  ourTargets,
  vipLeaseName,
} from "./routeLeases.ts";

const now = Date.parse("2026-11-24T00:00:10Z");
const member = (node: string, holder: string | undefined, renewedSAgo: number): V1Lease => ({
  metadata: {
    name: memberLeaseName("g", node),
    labels: { [ROLE_LABEL]: "member", [GROUP_LABEL]: "g" },
    annotations: {
      [NODE_ANNOTATION]: node,
      [INSTANCE_ANNOTATION]: `aws:///z/i-${node}`,
      [TARGET_ANNOTATION]: `eni-${node}`,
    },
  },
  spec: { holderIdentity: holder, leaseDurationSeconds: 3, renewTime: new Date(now - renewedSAgo * 1000) },
});

describe("route Leases", () => {
  const leases = [member("a", "pod-a", 1), member("b", "pod-b", 5), member("c", undefined, 0)];

  it("counts as members only held, unexpired member Leases", () => {
    expect(liveMembers(leases, now, now - 60_000).map((m) => m.identity)).toEqual(["pod-a"]);
  });
  it("judges no Lease expired before it has been watched for its duration", () => {
    // Just back after an outage: pod-b's Lease looks expired, but its renewal may not have arrived.
    expect(liveMembers(leases, now, now - 2_000).map((m) => m.identity)).toEqual(["pod-a", "pod-b"]);
    expect(liveMembers(leases, now, undefined).map((m) => m.identity)).toEqual(["pod-a", "pod-b"]);
    expect(liveMembers(leases, now, now - 3_000).map((m) => m.identity)).toEqual(["pod-a"]);
  });
  it("keeps the route target of every LB pod that ran as ours, live or not", () => {
    expect(ourTargets(leases)).toEqual(new Set(["eni-a", "eni-b", "eni-c"]));
  });
  it("tells when the next live Lease expires", () => {
    expect(nextExpiry(leases, now)).toBe(now + 2000);
  });
  it("changes its state key on a new holder or target, or an expiry, not on a renewal", () => {
    const key = leaseStateKey(leases, now);
    expect(leaseStateKey([member("a", "pod-a", 0), leases[1]!, leases[2]!], now)).toBe(key);
    expect(leaseStateKey([...leases].reverse(), now)).toBe(key);
    expect(leaseStateKey([member("a", undefined, 1), leases[1]!, leases[2]!], now)).not.toBe(key);
    expect(leaseStateKey([member("a", "pod-x", 1), leases[1]!, leases[2]!], now)).not.toBe(key);
    const moved = member("a", "pod-a", 1);
    moved.metadata!.annotations![TARGET_ANNOTATION] = "eni-new";
    expect(leaseStateKey([moved, leases[1]!, leases[2]!], now)).not.toBe(key);
    expect(leaseStateKey(leases.slice(1), now)).not.toBe(key);
    // pod-a's Lease (renewed 1 s ago, 3 s long) runs out: as if released.
    expect(leaseStateKey(leases, now + 2001)).toBe(
      leaseStateKey([member("a", undefined, 1), leases[1]!, leases[2]!], now),
    );
  });
  it("names Leases as DNS subdomains", () => {
    expect(vipLeaseName("g", "10.1.1.7")).toBe("plb-routes-g-vip-10-1-1-7");
    expect(memberLeaseName("g", "ip-10-0-0-1.ec2.internal")).toBe(
      "plb-routes-g-member-ip-10-0-0-1-ec2-internal",
    );
  });
});
