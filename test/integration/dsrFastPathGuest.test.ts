// The DSR fast path on Linux 6.1, the QEMU guest's kernel: the kernel of Debian 12, Amazon Linux
// 2023 and GKE's COS 113 LTS, older than tcx (6.6). There the loaders (`--hook auto`, as deployed)
// find no tcx and put their programs on tc filters; the kernel's verifier accepts all three
// programs; the LB pod's program tunnels the client's packets to the backend in our VXLAN format and
// the LB node's programs carry them between the node's uplink and the LB pod; `check` finds nothing
// to repair; and each loader takes its filters and the clsact qdiscs it added with it when its stdin
// closes. In the guest the loaders run as root (it has no setpriv); test/integration/dsrFastPath.test.ts
// runs them with the pod's and the agent's capabilities on this machine's kernel. One boot.
//
//   client ── node (LB node and the backend's host) ══ lb   (the LB pod: dsr_lb on eth0)
//                                                   ══ b1   (a backend: counts our tunnel's packets)
import { readFileSync } from "node:fs";
import { guestSection } from "../harness/qemu/guestOutput.ts";
import { GUEST_PATHS, runInIpvsGuest, type IpvsGuestResult } from "../harness/qemu/ipvsGuest.ts";
import { shellQuote } from "../harness/qemu/guestTopology.ts";
import { builtFastPath } from "../harness/fastPathBuild.ts";

const VIP = "10.1.1.10";
const PORT = 80;
const LB = "10.244.2.2";
const BACKEND = "10.244.1.2";
const LOADER = "/opt/portable-lb-fastpath";
/** Connection attempts from the client; each sends its SYN and, unanswered, retransmits it. */
const ATTEMPTS = 5;
const { ip, tc, nft } = GUEST_PATHS;

const sync = {
  op: "sync",
  services: [{ vip: VIP, port: PORT, protocol: "tcp", table: Array<string>(251).fill(BACKEND) }],
  backends: [BACKEND],
};

// dash, `set -eu`: any failing step ends the run, and beforeAll shows the output.
const script = String.raw`
set -eu
for ns in node lb b1 client; do ${ip} netns add $ns; ${ip} -n $ns link set lo up; done
plb_link() { # NS_A DEV_A ADDR_A NS_B DEV_B ADDR_B
  ${ip} link add $2 netns $1 type veth peer name $5 netns $4
  ${ip} -n $1 addr add $3 dev $2; ${ip} -n $4 addr add $6 dev $5
  ${ip} -n $1 link set $2 up; ${ip} -n $4 link set $5 up
}
plb_link node vcl 10.0.0.1/24 client eth0 10.0.0.2/24
plb_link node vlb 10.244.2.1/24 lb eth0 ${LB}/24
plb_link node vb1 10.244.1.1/24 b1 eth0 ${BACKEND}/24
${ip} -n client route add default via 10.0.0.1
${ip} -n lb route add default via 10.244.2.1
${ip} -n b1 route add default via 10.244.1.1
# Both forward, as on a cluster: the LB pod's kernel path forwards what it tunnels (and the
# programs' FIB lookups ask the kernel whether the device forwards).
for ns in node lb; do ${ip} netns exec $ns sysctl -q -w net.ipv4.ip_forward=1; done
${ip} -n node route add ${VIP}/32 via ${LB}
# The neighbours the programs address packets to, known (else they leave packets to the kernel).
${ip} netns exec node ping -c 1 -W 5 ${LB} >/dev/null
${ip} netns exec node ping -c 1 -W 5 ${BACKEND} >/dev/null
${ip} netns exec lb ping -c 1 -W 5 10.244.2.1 >/dev/null
# The backend counts what arrives in our tunnel: VXLAN to port 4789 with our VNI (0x706c62).
${ip} netns exec b1 ${nft} 'add table ip t; add chain ip t in { type filter hook prerouting priority 0; }; add rule ip t in udp dport 4789 @th,96,24 0x706c62 counter'

# plb_until FILE TEXT: waits (60 s at most, under emulation) until FILE holds TEXT.
plb_until() {
  plb_i=0
  until grep -q "$2" "$1"; do
    plb_i=$((plb_i + 1)); [ $plb_i -lt 300 ] || { echo "never saw $2 in $1:"; cat "$1"; exit 1; }
    sleep 0.2
  done
}
# plb_ask FD FILE N REQUEST: sends a request to a loader and waits for its Nth line of output.
plb_ask() {
  echo "$4" >&$1
  plb_i=0
  until [ "$(wc -l <"$2")" -ge "$3" ]; do
    plb_i=$((plb_i + 1)); [ $plb_i -lt 300 ] || { echo "no answer to $4:"; cat "$2"; exit 1; }
    sleep 0.2
  done
}
plb_filters() { # NS DEV: our filters on the device's ingress (pref 65000), and whether it has clsact
  echo "$1 $2: $(${ip} netns exec $1 ${tc} filter show dev $2 ingress pref 65000 2>/dev/null | grep -o 'name [a-z_]*' | tr '\n' ' ')clsact=$(${ip} netns exec $1 ${tc} qdisc show dev $2 | grep -c clsact || true)"
}

mkfifo /tmp/lb.in /tmp/node.in
: >/tmp/lb.out; : >/tmp/node.out
${ip} netns exec lb ${LOADER} --device eth0 </tmp/lb.in >/tmp/lb.out 2>&1 &
exec 3>/tmp/lb.in
${ip} netns exec node ${LOADER} node </tmp/node.in >/tmp/node.out 2>&1 &
exec 4>/tmp/node.in
plb_until /tmp/lb.out '"event"'
plb_until /tmp/node.out '"event"'
plb_ask 3 /tmp/lb.out 2 ${shellQuote(JSON.stringify(sync))}
plb_ask 4 /tmp/node.out 2 "{\"op\":\"sync\",\"uplinks\":[\"vcl\",\"vb1\"],\"pools\":[\"${VIP}/32\"],\"pods\":[{\"ip\":\"${LB}\",\"ifindex\":$(${ip} netns exec node cat /sys/class/net/vlb/ifindex)}]}"
echo "=== attached"
plb_filters lb eth0; plb_filters node vcl; plb_filters node vlb

# In a subshell whose stderr is dropped: dash reports the wget that timeout ends as "Terminated".
for i in $(seq ${ATTEMPTS}); do (${ip} netns exec client timeout 3 wget -q -O /dev/null http://${VIP}:${PORT}/ || true) 2>/dev/null; done
plb_ask 3 /tmp/lb.out 3 '{"op":"stats"}'
plb_ask 3 /tmp/lb.out 4 '{"op":"check"}'
plb_ask 4 /tmp/node.out 3 '{"op":"stats"}'
plb_ask 4 /tmp/node.out 4 '{"op":"check"}'
echo "=== tunnel"
${ip} netns exec b1 ${nft} list chain ip t in | grep -o 'packets [0-9]*'

exec 3>&- 4>&-
wait
echo "=== lb"
cat /tmp/lb.out
echo "=== node"
cat /tmp/node.out
echo "=== detached"
plb_filters lb eth0; plb_filters node vcl; plb_filters node vlb
`;

let result: IpvsGuestResult;
/** A section's lines, blank ones left out. */
const section = (name: string) => guestSection(result.output, name).filter((l) => l !== "");
/** A section's JSON lines (a loader's events and answers), parsed. */
const lines = (name: string) => section(name).map((l) => JSON.parse(l) as unknown);

beforeAll(async () => {
  const { loader } = builtFastPath();
  result = await runInIpvsGuest({
    script,
    timeoutMs: 300_000,
    extra: [
      { path: "opt", type: "dir" },
      { path: LOADER.slice(1), type: "file", content: readFileSync(loader), executable: true },
    ],
  });
  if (result.exitCode !== 0) throw new Error(`the guest's script failed:\n${result.output}`);
}, 320_000);

describe("DSR fast path on Linux 6.1 (no tcx): tc filters", () => {
  it("loads every program, and auto takes tc", () => {
    const [lbReady] = lines("lb");
    const [nodeReady] = lines("node");
    expect(lbReady).toMatchObject({ event: "ready", hook: "tc" });
    expect(nodeReady).toMatchObject({ event: "ready", hook: "tc" });
    expect(lines("lb")[1]).toMatchObject({ ok: true, changes: expect.any(Number) as number });
    expect(lines("node")[1]).toMatchObject({ ok: true, skipped: [] });
  });

  it("attaches each program as our filter on its device's ingress", () => {
    expect(section("attached")).toEqual([
      "lb eth0: name dsr_lb clsact=1",
      "node vcl: name to_lb_pod clsact=1",
      "node vlb: name from_lb_pod clsact=1",
    ]);
  });

  it("carries the client's packets uplink -> LB pod -> tunnel -> backend, with nothing to repair", () => {
    const lbStats = lines("lb")[2] as { ok: boolean; forwarded: number };
    const nodeStats = (lines("node")[2] as { counts: { to_pod: number; from_pod: number } }).counts;
    // Each attempt's SYN and its retransmissions.
    expect(lbStats.forwarded).toBeGreaterThanOrEqual(ATTEMPTS);
    expect(nodeStats.to_pod).toBeGreaterThanOrEqual(lbStats.forwarded);
    expect(nodeStats.from_pod).toBeGreaterThanOrEqual(lbStats.forwarded);
    const [tunnel] = section("tunnel");
    expect(Number(/packets (\d+)/.exec(tunnel ?? "")?.[1])).toBeGreaterThanOrEqual(lbStats.forwarded);
    expect(lines("lb")[3]).toEqual({ ok: true, drift: [] });
    expect(lines("node")[3]).toEqual({ ok: true, drift: [], skipped: [] });
  });

  it("takes its filters and the clsact qdiscs it added with it when stdin closes", () => {
    expect(section("detached")).toEqual(["lb eth0: clsact=0", "node vcl: clsact=0", "node vlb: clsact=0"]);
  });
});
