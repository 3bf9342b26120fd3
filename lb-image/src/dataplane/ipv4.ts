// IPv4 addresses as 32-bit numbers, for the data plane's own arithmetic (the DSR marks, the
// firewall's intervals). Dependency-free: the engines run with zod alone (the QEMU guest tests).

export function ipv4ToNumber(ip: string): number {
  return ip.split(".").reduce((n, octet) => n * 256 + Number(octet), 0);
}

export function numberToIpv4(n: number): string {
  return [24, 16, 8, 0].map((s) => Math.floor(n / 2 ** s) % 256).join(".");
}
