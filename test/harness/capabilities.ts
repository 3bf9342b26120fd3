// Capability sets as /proc/PID/status prints them (CapEff, CapBnd, ...): 16 hex digits, one bit per
// capability (linux/capability.h numbers them).
export const CAP = { NET_BIND_SERVICE: 10, NET_ADMIN: 12, SYS_ADMIN: 21, BPF: 39 } as const;

/** The set holding exactly `bits`. */
export const capMask = (...bits: number[]) =>
  bits
    .reduce((m, b) => m | (1n << BigInt(b)), 0n)
    .toString(16)
    .padStart(16, "0");
