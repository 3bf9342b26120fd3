// SPDX-License-Identifier: GPL-2.0
// An LB node's share of the DSR fast path (../README.md): the two hops between the node's uplink
// and its LB pods, done the way the kernel would forward them but without its IP stack, its
// netfilter hooks, the pod bridge and the veths' backlog queue.
//  - to_lb_pod, on the uplink's tcx ingress: a packet to a VIP pool whose route's next hop is a
//    local LB pod (the node agent's VIP routes) goes straight into that pod's eth0 ingress
//    (bpf_redirect_peer), where the pod's own fast path (dsr_lb.c) takes it. Other packets cost
//    one trie lookup.
//  - from_lb_pod, on each LB pod's host-side veth: a tunnel packet the pod sends (VXLAN with our
//    VNI) leaves by the uplink its route names, straight from the veth's ingress.
// Both follow the node's own routing table and neighbours (bpf_fib_lookup), decrement the TTL as
// forwarding does, and leave anything else (no route, unresolved neighbour, too big, another
// device) to the kernel, unchanged. The node agent loads them with its loader
// (portable-lb-fastpath node) and says which pods are LB pods and which devices are uplinks.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/pkt_cls.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define VXLAN_PORT 4789
#define VXLAN_VNI 0x706c62
#define AF_INET 2

enum stat {
	STAT_TO_POD,   // redirected from an uplink into an LB pod
	STAT_FROM_POD, // redirected from an LB pod to an uplink
	STAT_NOT_OURS, // not for an LB pod, or not our tunnel: the usual case on an uplink
	STAT_TTL,      // the kernel sends the ICMP
	STAT_NO_ROUTE, // no route, or one elsewhere than an uplink
	STAT_NO_NEIGH, // the kernel resolves the neighbour
	STAT_TOO_BIG,  // the kernel fragments or sends the ICMP
	STAT_MAX,
};

struct pool_key {
	__u32 prefixlen;
	__be32 addr;
};

// The VIP pools (the prefixes the node agent routes to its LB pods).
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 1024);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct pool_key);
	__type(value, __u8);
} vip_pools SEC(".maps");

// An LB pod on this node by its IP: the ifindex of its veth's host side.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __be32);
	__type(value, __u32);
} lb_pods SEC(".maps");

// The devices tunnel packets may leave by (ifindex -> 1): the uplinks to_lb_pod is attached to.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u8);
} uplinks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} node_stats SEC(".maps");

static __always_inline int count(enum stat why, int verdict)
{
	__u32 k = why;
	__u64 *n = bpf_map_lookup_elem(&node_stats, &k);
	if (n)
		*n += 1;
	return verdict;
}

static __always_inline __u16 csum_fold(__u32 sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)~sum;
}

// ip_decrease_ttl(): RFC 1624's incremental checksum.
static __always_inline void decrease_ttl(struct iphdr *ip)
{
	__u32 sum = (__u16)~ip->check + (__u16)~bpf_htons(ip->ttl << 8) + bpf_htons((ip->ttl - 1) << 8);
	ip->ttl -= 1;
	ip->check = csum_fold(sum);
}

// The IPv4 header of the packet, or 0.
static __always_inline struct iphdr *ipv4(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = data + sizeof(*eth);
	if ((void *)(ip + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
		return 0;
	return ip;
}

// The route the kernel would take for this packet, as it came in on skb's device. tot_len 0: the
// helper then checks the skb against the device's MTU itself, GSO included.
static __always_inline long route(struct __sk_buff *skb, struct iphdr *ip, struct bpf_fib_lookup *fib)
{
	__builtin_memset(fib, 0, sizeof(*fib));
	fib->family = AF_INET;
	fib->tos = ip->tos;
	fib->l4_protocol = ip->protocol;
	fib->ipv4_src = ip->saddr;
	fib->ipv4_dst = ip->daddr;
	fib->ifindex = skb->ifindex;
	return bpf_fib_lookup(skb, fib, sizeof(*fib), 0);
}

// The verdict for a lookup that did not succeed.
static __always_inline int declined(long rc)
{
	if (rc == BPF_FIB_LKUP_RET_NO_NEIGH)
		return count(STAT_NO_NEIGH, TC_ACT_OK);
	if (rc == BPF_FIB_LKUP_RET_FRAG_NEEDED)
		return count(STAT_TOO_BIG, TC_ACT_OK);
	return count(STAT_NO_ROUTE, TC_ACT_OK);
}

// Addressed as the kernel would address it to the next hop, one hop older.
static __always_inline int forward(struct __sk_buff *skb, struct bpf_fib_lookup *fib)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = data + sizeof(*eth);
	if ((void *)(ip + 1) > end)
		return 0;
	__builtin_memcpy(eth->h_dest, fib->dmac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, fib->smac, ETH_ALEN);
	decrease_ttl(ip);
	return 1;
}

SEC("tc")
int to_lb_pod(struct __sk_buff *skb)
{
	// Only what is addressed to this node is routed (on a bridge port, the pod's own
	// frames are the bridge's, addressed to the bridge: from_lb_pod does not ask).
	struct iphdr *ip = ipv4(skb);
	if (!ip || skb->pkt_type != PACKET_HOST)
		return count(STAT_NOT_OURS, TC_ACT_OK);
	struct pool_key pool = {.prefixlen = 32, .addr = ip->daddr};
	if (!bpf_map_lookup_elem(&vip_pools, &pool))
		return count(STAT_NOT_OURS, TC_ACT_OK);
	struct bpf_fib_lookup fib;
	long rc = route(skb, ip, &fib);
	// A gateway route's lookup names the next hop in ipv4_dst.
	__be32 hop = fib.ipv4_dst;
	__u32 *veth = bpf_map_lookup_elem(&lb_pods, &hop);
	if (!veth)
		return count(STAT_NOT_OURS, TC_ACT_OK);
	if (ip->ttl <= 1)
		return count(STAT_TTL, TC_ACT_OK);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS)
		return declined(rc);
	__u32 ifindex = *veth;
	if (!forward(skb, &fib))
		return TC_ACT_OK;
	count(STAT_TO_POD, 0);
	return bpf_redirect_peer(ifindex, 0);
}

SEC("tc")
int from_lb_pod(struct __sk_buff *skb)
{
	struct iphdr *ip = ipv4(skb);
	if (!ip)
		return count(STAT_NOT_OURS, TC_ACT_OK);
	void *end = (void *)(long)skb->data_end;
	struct udphdr *udp = (void *)(ip + 1);
	__u8 *vxlan = (void *)(udp + 1);
	if (ip->protocol != IPPROTO_UDP || ip->ihl != 5 || (void *)(vxlan + 8) > end ||
	    udp->dest != bpf_htons(VXLAN_PORT) || vxlan[4] != ((VXLAN_VNI >> 16) & 0xff) ||
	    vxlan[5] != ((VXLAN_VNI >> 8) & 0xff) || vxlan[6] != (VXLAN_VNI & 0xff))
		return count(STAT_NOT_OURS, TC_ACT_OK);
	if (ip->ttl <= 1)
		return count(STAT_TTL, TC_ACT_OK);
	struct bpf_fib_lookup fib;
	long rc = route(skb, ip, &fib);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS)
		return declined(rc);
	__u32 out = fib.ifindex;
	if (!bpf_map_lookup_elem(&uplinks, &out))
		return count(STAT_NO_ROUTE, TC_ACT_OK); // a backend on this node: the pod bridge's business
	if (!forward(skb, &fib))
		return TC_ACT_OK;
	count(STAT_FROM_POD, 0);
	return bpf_redirect(out, 0);
}

char LICENSE[] SEC("license") = "GPL";
