// SPDX-License-Identifier: GPL-2.0
// The backend pod's DSR decapsulation as a tc ingress program on its uplink (the node agent
// attaches it: lb-image/src/nodeAgent/dsr/podDecap.ts). A packet of exactly the tunnel contract
// (lb-image/src/dataplane/dsr/dsrTunnel.ts) loses its 50 bytes of outer IPv4, UDP, VXLAN and inner
// Ethernet in place, and goes on into the pod's stack as if the client's packet had arrived on the
// uplink: no trip through the VXLAN socket, its GRO cells and a second NAPI pass. Anything else
// passes untouched to the next filter, and the pod's VXLAN device (still there) decapsulates what
// this program declines: it is only an accelerator.
//
// Why this is enough:
//  - the inner packet is not touched, so its L4 checksum stays valid: CHECKSUM_PARTIAL offsets
//    are from skb->head and CHECKSUM_COMPLETE is corrected by the helper (skb_postpull_rcsum);
//  - the outer Ethernet header stays, addressed to the pod's own MAC: skb->pkt_type is
//    PACKET_HOST already (checked), and skb->protocol stays IPv4 (IPv4 in IPv4, so no
//    BPF_F_ADJ_ROOM_DECAP_L3_* flag is needed);
//  - the client's address arrives on the uplink, where its route back is: rp_filter passes
//    it even where strict;
//  - a GSO skb (an LB pod on the same node sends whole TSO-sized tunnel packets over the veths)
//    is decapsulated when it carries TCP, its gso_size (the inner MSS) kept: the pod's TCP takes it
//    as it would a GRO'd one (measured on 6.18: bulk TCP, byte-exact, the device idle). Other GSO
//    skbs (UDP GSO) go to the device, as do outer CE marks (the device copies ECN to the inner
//    header) and anything not in the linear head after a pull.
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
#define VXLAN_FLAGS 0x08000000 /* the I flag, reserved bits 0 */
#define VXLAN_VNI 0x706c62     /* "plb" */
#define OUTER_LEN (sizeof(struct iphdr) + sizeof(struct udphdr) + sizeof(struct vxlanhdr) + ETH_HLEN)
#define ECN_CE 3

struct vxlanhdr {
	__be32 flags;
	__be32 vni; /* VNI << 8 */
};

/* The backend device's MAC, the inner frame's destination (DSR_BACKEND_MAC), as 4 + 2 bytes. */
#define BACKEND_MAC_HI 0x02706c62
#define BACKEND_MAC_LO 0x0001

static __always_inline int ours(void *data)
{
	struct ethhdr *eth = data;
	struct iphdr *ip = data + ETH_HLEN;
	struct udphdr *udp = (void *)(ip + 1);
	struct vxlanhdr *vxlan = (void *)(udp + 1);
	struct ethhdr *inner = (void *)(vxlan + 1);
	return eth->h_proto == bpf_htons(ETH_P_IP) && ip->version == 4 && ip->ihl == 5 &&
	       ip->protocol == IPPROTO_UDP && !(ip->frag_off & bpf_htons(0x3fff)) &&
	       (ip->tos & 3) != ECN_CE && udp->dest == bpf_htons(VXLAN_PORT) &&
	       vxlan->flags == bpf_htonl(VXLAN_FLAGS) && vxlan->vni == bpf_htonl(VXLAN_VNI << 8) &&
	       inner->h_proto == bpf_htons(ETH_P_IP) &&
	       *(__be32 *)inner->h_dest == bpf_htonl(BACKEND_MAC_HI) &&
	       *(__be16 *)(inner->h_dest + 4) == bpf_htons(BACKEND_MAC_LO);
}

SEC("tc")
int dsr_decap(struct __sk_buff *skb)
{
	if (skb->protocol != bpf_htons(ETH_P_IP) || skb->pkt_type != PACKET_HOST)
		return TC_ACT_UNSPEC;
	__u32 need = ETH_HLEN + OUTER_LEN + sizeof(struct iphdr);
	if (skb->len < need)
		return TC_ACT_UNSPEC;
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	if (data + need > end) {
		if (bpf_skb_pull_data(skb, need))
			return TC_ACT_UNSPEC;
		data = (void *)(long)skb->data;
		end = (void *)(long)skb->data_end;
		if (data + need > end)
			return TC_ACT_UNSPEC;
	}
	if (!ours(data))
		return TC_ACT_UNSPEC;
	struct iphdr *inner = data + ETH_HLEN + OUTER_LEN;
	if (skb->gso_size && inner->protocol != IPPROTO_TCP)
		return TC_ACT_UNSPEC;
	if (bpf_skb_adjust_room(skb, -(__s32)OUTER_LEN, BPF_ADJ_ROOM_MAC, BPF_F_ADJ_ROOM_FIXED_GSO))
		return TC_ACT_UNSPEC;
	/* Decapsulated: the client's packet goes up the stack, past any later filter (as it would
	 * from the VXLAN device, where no filter of the uplink sees it). */
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
