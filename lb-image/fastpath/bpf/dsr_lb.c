// SPDX-License-Identifier: GPL-2.0
// The LB pod's DSR fast path (../README.md): on the uplink's tcx ingress, a packet to a DSR service
// it was given gets the backend the nftables path would give it (its flow table, else the service's
// Maglev table under the same jhash) and leaves in VXLAN exactly as that path's tunnel would send
// it. Anything else, or anything this program cannot do as the kernel would, returns TC_ACT_OK:
// the nftables path, always installed underneath, handles it.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/pkt_cls.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

// Shared with the loader (maps.go) and the nftables engine (nftRuleset.ts, dsrTunnel.ts).
#define FLOW_HASH_SEED 0x706c62
#define FLOW_TIMEOUT_NS (300ULL * 1000000000ULL) // FLOW_TIMEOUT_S
// How long a TCP flow's entry outlives the FIN or RST that ends it (see the flow ends below).
#define FLOW_CLOSING_NS (10ULL * 1000000000ULL)
#define FLOW_TABLE_SIZE 262144                   // per protocol in nft: both share one map here
#define MAX_SERVICES 16384
#define VXLAN_PORT 4789
#define VXLAN_VNI 0x706c62
#define ENCAP_LEN 50 // outer IPv4 20 + UDP 8 + VXLAN 8 + inner Ethernet 14

// Why a packet was left to the kernel path (stats index; names in maps.go).
enum stat {
	STAT_FORWARDED,
	STAT_NOT_SERVICE, // not IPv4 TCP/UDP to a fast-path service
	STAT_IP_OPTIONS,
	STAT_FRAGMENT,
	STAT_GSO,
	STAT_UNKNOWN_FLOW, // a TCP packet, not a SYN, of a flow never seen here: nft's flow table may know it
	STAT_NO_SLOT,      // the Maglev slot is missing (mid-sync)
	STAT_TTL,          // the kernel sends the ICMP
	STAT_TOO_BIG,
	STAT_NO_ROUTE,
	STAT_NO_ROOM,
	STAT_NO_CONFIG,
	STAT_MAX,
};

struct config {
	__u32 ifindex;
	__be32 addr; // the device's IPv4 address: the outer source
	__u32 mtu;
	__u32 port_min; // ip_local_port_range, as the VXLAN device picks source ports
	__u32 port_max;
	__u32 veth; // the device is a veth: its peer may take packets straight (bpf_redirect_peer)
};

struct service_key {
	__be32 vip;
	__be16 port;
	__u8 proto;
	__u8 pad;
};

struct service {
	__u32 id;   // index into tables and service_flows
	__u32 size; // Maglev table size (prime): its table's length
};

struct flow_key {
	__be32 saddr;
	__be32 daddr;
	__be16 sport;
	__be16 dport;
	__u8 proto;
	__u8 pad[3];
};

struct flow {
	__be32 backend;
	__u32 closing; // a FIN or RST passed: FLOW_CLOSING_NS from then on
	__u64 seen_ns; // expired after FLOW_TIMEOUT_NS, as nft's element timeout
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct config);
} config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_SERVICES);
	__type(key, struct service_key);
	__type(value, struct service);
} services SEC(".maps");

// Each service's Maglev table, by its id: an array of its own size (slot -> backend) that the loader
// fills and then swaps in whole, as Cilium's maglev map does. One lookup into a small array per new
// flow, where a hash of every service's slots took a 64 MB bucket array to hold millions of slots.
struct maglev_table {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); // the template: each table has its service's size (BPF_F_INNER_MAP)
	__uint(map_flags, BPF_F_INNER_MAP);
	__type(key, __u32);
	__type(value, __be32);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, MAX_SERVICES);
	__type(key, __u32);
	__array(values, struct maglev_table);
} tables SEC(".maps");

// Every backend with a tunnel on this LB (draining ones too): nft's `fib ... oifname plb-dsr`.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __be32);
	__type(value, __u8);
} backends SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 2 * FLOW_TABLE_SIZE);
	__type(key, struct flow_key);
	__type(value, struct flow);
} flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

// Flows that took the Maglev table, per service id (new flows: rare enough for a shared atomic).
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_SERVICES);
	__type(key, __u32);
	__type(value, __u64);
} service_flows SEC(".maps");

static __always_inline int pass(enum stat why)
{
	__u32 k = why;
	__u64 *n = bpf_map_lookup_elem(&stats, &k);
	if (n)
		*n += 1;
	return TC_ACT_OK;
}

// include/linux/jhash.h
#define rol32(w, s) (((w) << (s)) | ((w) >> (32 - (s))))
#define jhash_final(a, b, c)                                                                                   \
	{                                                                                                      \
		c ^= b;                                                                                        \
		c -= rol32(b, 14);                                                                             \
		a ^= c;                                                                                        \
		a -= rol32(c, 11);                                                                             \
		b ^= a;                                                                                        \
		b -= rol32(a, 25);                                                                             \
		c ^= b;                                                                                        \
		c -= rol32(b, 16);                                                                             \
		a ^= c;                                                                                        \
		a -= rol32(c, 4);                                                                              \
		b ^= a;                                                                                        \
		b -= rol32(a, 14);                                                                             \
		c ^= b;                                                                                        \
		c -= rol32(b, 24);                                                                             \
	}

// nft's `jhash ip saddr . th sport mod size seed FLOW_HASH_SEED`: the concatenation is 8 bytes
// (each field padded to a 4-byte register), hashed by jhash() and scaled by reciprocal_scale().
static __always_inline __u32 maglev_slot(__be32 saddr, __be16 sport, __u32 size)
{
	const __u8 *s = (const __u8 *)&saddr, *p = (const __u8 *)&sport;
	__u32 a, b, c;
	a = b = c = 0xdeadbeef + 8 + FLOW_HASH_SEED;
	// jhash()'s byte-wise tail for length 8: k[4..7] = sport, 0, 0
	b += (__u32)p[1] << 8;
	b += p[0];
	a += (__u32)s[3] << 24;
	a += (__u32)s[2] << 16;
	a += (__u32)s[1] << 8;
	a += s[0];
	jhash_final(a, b, c);
	return (__u32)(((__u64)c * size) >> 32);
}

static __always_inline int flow_expired(const struct flow *f, __u64 now)
{
	return now - f->seen_ns > (f->closing ? FLOW_CLOSING_NS : FLOW_TIMEOUT_NS);
}

// The flow's entry, if it is live and its backend still has a tunnel here (else nft passes over it).
static __always_inline struct flow *live_flow(struct flow_key *k, __u64 now)
{
	struct flow *f = bpf_map_lookup_elem(&flows, k);
	if (!f || flow_expired(f, now))
		return 0;
	if (!bpf_map_lookup_elem(&backends, &f->backend))
		return 0;
	return f;
}

// nft's `update @flows { key : mark }`: a new entry, or the existing one's timeout refreshed
// (its backend kept, even when stale: nft's dynset changes only the timeout of an element it finds).
static __always_inline void flow_update(struct flow_key *k, __be32 backend, __u64 now)
{
	struct flow *f = bpf_map_lookup_elem(&flows, k);
	if (f && !flow_expired(f, now)) {
		f->seen_ns = now;
		return;
	}
	struct flow fresh = {.backend = backend, .seen_ns = now};
	bpf_map_update_elem(&flows, k, &fresh, BPF_ANY);
}

static __always_inline __u16 csum_fold(__u32 sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)~sum;
}

SEC("tc")
int dsr_lb(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = data + sizeof(*eth);
	// The ports of TCP and UDP sit at the same place; the TCP header is read only for TCP.
	struct udphdr *l4 = (void *)(ip + 1);
	if ((void *)(l4 + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
		return pass(STAT_NOT_SERVICE);
	if (ip->protocol != IPPROTO_TCP && ip->protocol != IPPROTO_UDP)
		return pass(STAT_NOT_SERVICE);
	struct service_key sk = {.vip = ip->daddr, .port = l4->dest, .proto = ip->protocol};
	struct service *svc = bpf_map_lookup_elem(&services, &sk);
	if (!svc)
		return pass(STAT_NOT_SERVICE);
	if (ip->ihl != 5)
		return pass(STAT_IP_OPTIONS);
	if (ip->frag_off & bpf_htons(0x3fff)) // MF or an offset
		return pass(STAT_FRAGMENT);
	if (skb->gso_segs > 1)
		return pass(STAT_GSO);
	if (ip->ttl <= 1)
		return pass(STAT_TTL);
	__u32 zero = 0;
	struct config *cfg = bpf_map_lookup_elem(&config, &zero);
	if (!cfg || cfg->addr == 0)
		return pass(STAT_NO_CONFIG);
	__u16 inner_len = bpf_ntohs(ip->tot_len);
	if (inner_len + ENCAP_LEN > cfg->mtu)
		return pass(STAT_TOO_BIG);

	// The nft dsr chain: TCP flow ends, then the flow table, then the service's Maglev table.
	__u64 now = bpf_ktime_get_ns();
	struct flow_key fk = {
	    .saddr = ip->saddr, .daddr = ip->daddr, .sport = l4->source, .dport = l4->dest, .proto = ip->protocol};
	__be32 backend = 0;
	int syn = 0; // a new connection: it never follows an old entry (its new one replaces it)
	if (ip->protocol == IPPROTO_TCP) {
		struct tcphdr *tcp = (void *)(ip + 1);
		if ((void *)(tcp + 1) > end)
			return pass(STAT_NOT_SERVICE);
		syn = tcp->syn && !tcp->ack;
		if (!syn) {
			struct flow *f = live_flow(&fk, now);
			if (!f && !bpf_map_lookup_elem(&flows, &fk))
				return pass(STAT_UNKNOWN_FLOW);
			if (f) {
				backend = f->backend;
				f->seen_ns = now;
				// nft deletes the entry at a FIN or RST; here it stays a little while, so the
				// connection's last ACKs still find it (unknown, they would take the kernel path).
				// A SYN on the same ports deletes it as before.
				if (tcp->fin || tcp->rst)
					f->closing = 1;
			}
		}
	} else {
		struct flow *f = live_flow(&fk, now);
		if (f) {
			backend = f->backend;
			f->seen_ns = now;
		}
	}
	if (!backend) {
		__u32 id = svc->id;
		void *table = bpf_map_lookup_elem(&tables, &id);
		__u32 slot = maglev_slot(ip->saddr, l4->source, svc->size);
		__be32 *b = table ? bpf_map_lookup_elem(table, &slot) : 0;
		if (!b) {
			if (syn) // the kernel path takes this connection: no old entry may outlive its SYN
				bpf_map_delete_elem(&flows, &fk);
			return pass(STAT_NO_SLOT);
		}
		backend = *b;
		if (syn) { // one write, where a delete, a lookup and a write did the same
			struct flow fresh = {.backend = backend, .seen_ns = now};
			bpf_map_update_elem(&flows, &fk, &fresh, BPF_ANY);
		} else {
			flow_update(&fk, backend, now);
		}
		__u64 *n = bpf_map_lookup_elem(&service_flows, &id);
		if (n)
			__sync_fetch_and_add(n, 1);
	}

	// The outer packet must leave by this device, as the kernel path's would (its tunnel routes by
	// the main table, so the lookup goes there directly, past the policy rules the kernel path's
	// marks use); the neighbour may still be unresolved: bpf_redirect_neigh resolves it.
	struct bpf_fib_lookup fib = {
	    .family = 2, // AF_INET
	    .l4_protocol = IPPROTO_UDP,
	    .tot_len = inner_len + ENCAP_LEN,
	    .ifindex = skb->ifindex,
	    .ipv4_src = cfg->addr,
	    .ipv4_dst = backend,
	};
	long rc = bpf_fib_lookup(skb, &fib, sizeof(fib), BPF_FIB_LOOKUP_OUTPUT | BPF_FIB_LOOKUP_DIRECT);
	if (rc == BPF_FIB_LKUP_RET_FRAG_NEEDED)
		return pass(STAT_TOO_BIG);
	if ((rc != BPF_FIB_LKUP_RET_SUCCESS && rc != BPF_FIB_LKUP_RET_NO_NEIGH) || fib.ifindex != skb->ifindex)
		return pass(STAT_NO_ROUTE);

	// Forwarded, as by the kernel: the inner TTL drops by one (RFC 1624 incremental checksum).
	__u8 tos = ip->tos;
	__u32 sum = (__u16)~ip->check + (__u16)~bpf_htons(ip->ttl << 8) + bpf_htons((ip->ttl - 1) << 8);
	ip->ttl -= 1;
	ip->check = csum_fold(sum);
	__u32 hash = bpf_get_hash_recalc(skb);

	if (bpf_skb_adjust_room(skb, ENCAP_LEN, BPF_ADJ_ROOM_MAC,
				BPF_F_ADJ_ROOM_ENCAP_L3_IPV4 | BPF_F_ADJ_ROOM_ENCAP_L4_UDP |
				    BPF_F_ADJ_ROOM_ENCAP_L2(ETH_HLEN))) {
		// Undo the TTL: the kernel path forwards the packet as it came.
		data = (void *)(long)skb->data;
		end = (void *)(long)skb->data_end;
		ip = data + sizeof(struct ethhdr);
		if ((void *)(ip + 1) > end)
			return TC_ACT_SHOT;
		sum = (__u16)~ip->check + (__u16)~bpf_htons(ip->ttl << 8) + bpf_htons((ip->ttl + 1) << 8);
		ip->ttl += 1;
		ip->check = csum_fold(sum);
		return pass(STAT_NO_ROOM);
	}
	data = (void *)(long)skb->data;
	end = (void *)(long)skb->data_end;
	struct iphdr *outer = data + sizeof(struct ethhdr);
	struct udphdr *udp = (void *)(outer + 1);
	__u8 *vxlan = (void *)(udp + 1);
	struct ethhdr *inner = (void *)(vxlan + 8);
	if ((void *)(inner + 1) > end)
		return TC_ACT_SHOT; // cannot happen: the room was just made

	// As the VXLAN device would: ECN copied out (CE as ECT(0)), TTL 64, no DF (the route sets none).
	outer->version = 4;
	outer->ihl = 5;
	outer->tos = (tos & 3) == 3 ? 2 : tos & 3;
	outer->tot_len = bpf_htons(inner_len + ENCAP_LEN);
	outer->id = (__u16)bpf_get_prandom_u32();
	outer->frag_off = 0;
	outer->ttl = 64;
	outer->protocol = IPPROTO_UDP;
	outer->check = 0;
	outer->saddr = cfg->addr;
	outer->daddr = backend;
	__u32 c = 0;
	__u16 *w = (__u16 *)outer;
#pragma unroll
	for (int i = 0; i < 10; i++)
		c += w[i];
	outer->check = csum_fold(c);

	// udp_flow_src_port(): the flow hash, folded, scaled into the local port range.
	hash ^= hash << 16;
	udp->source = bpf_htons((__u16)((((__u64)hash * (cfg->port_max - cfg->port_min)) >> 32) + cfg->port_min));
	udp->dest = bpf_htons(VXLAN_PORT);
	udp->len = bpf_htons(inner_len + ENCAP_LEN - sizeof(struct iphdr));
	udp->check = 0;

	vxlan[0] = 0x08; // flags: VNI valid
	vxlan[1] = vxlan[2] = vxlan[3] = 0;
	vxlan[4] = (VXLAN_VNI >> 16) & 0xff;
	vxlan[5] = (VXLAN_VNI >> 8) & 0xff;
	vxlan[6] = VXLAN_VNI & 0xff;
	vxlan[7] = 0;

	// dsrTunnel.ts: DSR_BACKEND_MAC, DSR_LB_MAC
	const __u8 dst[ETH_ALEN] = {0x02, 0x70, 0x6c, 0x62, 0x00, 0x01};
	const __u8 src[ETH_ALEN] = {0x02, 0x70, 0x6c, 0x62, 0x00, 0x00};
	__builtin_memcpy(inner->h_dest, dst, ETH_ALEN);
	__builtin_memcpy(inner->h_source, src, ETH_ALEN);
	inner->h_proto = bpf_htons(ETH_P_IP);

	pass(STAT_FORWARDED);
	// With the neighbour known and a veth to hand it to, the packet goes straight into the node's
	// side of the veth (its ingress, as if the pod had sent it, without the transmit and the
	// node's backlog queue); else bpf_redirect_neigh resolves the neighbour.
	if (rc == BPF_FIB_LKUP_RET_SUCCESS && cfg->veth) {
		struct ethhdr *eth = data;
		__builtin_memcpy(eth->h_dest, fib.dmac, ETH_ALEN);
		__builtin_memcpy(eth->h_source, fib.smac, ETH_ALEN);
		return bpf_redirect_peer(skb->ifindex, 0);
	}
	return bpf_redirect_neigh(skb->ifindex, 0, 0, 0);
}

char LICENSE[] SEC("license") = "GPL";
