// Pods kept from the cloud instance's metadata service. Its HTTP API serves this machine's bootstrap
// script (the join token; on the control plane, the cluster CA's key) and the instance's cloud
// credentials, to anything on the machine that asks. The node's own processes and host-network pods
// (the kubelet, flannel, the node agent) still reach it: the rule sees only forwarded packets. DNS
// stays open, because GCE's resolver lives at the same address. In the cloud-routes mode the LB pods
// take their credentials from it: the node agent keeps the guard's set of exempt addresses to its
// node's LB pods (lb-image/src/nodeAgent/metadataAccess.ts).
import { INSTANCE_METADATA_ADDRESS, METADATA_GUARD } from "@portable-lb/core";

export const METADATA_GUARD_FILE = "/etc/portable-lb/metadata-guard.nft";
export const METADATA_GUARD_UNIT = "portable-lb-metadata-guard.service";

/** The guard as an `nft -f` file; loading it again replaces the table. */
export function metadataGuardRules(): string {
  const t = `inet ${METADATA_GUARD.table}`;
  const m = INSTANCE_METADATA_ADDRESS;
  return [
    // Declaring the table first lets the delete succeed when it does not exist yet.
    `table ${t}`,
    `delete table ${t}`,
    `table ${t} {`,
    // The node agent's: its node's LB pods, in the cloud-routes mode only.
    `  set ${METADATA_GUARD.lbPodsSet} { type ipv4_addr; }`,
    "  chain forward {",
    // Before the filters kube-proxy and flannel add, so none of their accepts comes first.
    "    type filter hook forward priority filter - 10; policy accept;",
    `    ip daddr ${m} ip saddr @${METADATA_GUARD.lbPodsSet} accept`,
    `    ip daddr ${m} udp dport 53 accept`,
    `    ip daddr ${m} tcp dport 53 accept`,
    `    ip daddr ${m} counter drop`,
    "  }",
    "}",
    "",
  ].join("\n");
}

/** The systemd unit that loads the guard at every boot; the kubelet requires it. */
export function metadataGuardUnit(): string {
  return [
    "[Unit]",
    "Description=portable-lb: keep pods from the instance metadata service",
    "Before=kubelet.service",
    "[Service]",
    "Type=oneshot",
    "RemainAfterExit=yes",
    `ExecStart=/usr/sbin/nft -f ${METADATA_GUARD_FILE}`,
    "[Install]",
    "WantedBy=multi-user.target",
    "RequiredBy=kubelet.service",
    "",
  ].join("\n");
}

/** Script lines that install the guard now and at every boot, before the kubelet starts any pod. */
export function metadataGuardLines(): string[] {
  return [
    "# Pods may not read the instance metadata: it serves this script (the join token, and on the",
    "# control plane the CA key) and the machine's cloud credentials; only LB pods that need their",
    "# credentials (cloud-routes mode) are let through, by the node agent. Loaded at every boot before",
    "# the kubelet, which does not start without it.",
    "command -v nft >/dev/null || apt-get install -y -q nftables",
    "install -d -m 0755 /etc/portable-lb",
    `cat >${METADATA_GUARD_FILE} <<'NFT'`,
    metadataGuardRules().trimEnd(),
    "NFT",
    `cat >/etc/systemd/system/${METADATA_GUARD_UNIT} <<'UNIT'`,
    metadataGuardUnit().trimEnd(),
    "UNIT",
    "systemctl daemon-reload",
    `systemctl enable --now ${METADATA_GUARD_UNIT}`,
  ];
}
