// The record's settings are checked where it is made, before a migration touches anything.
import { Rfc2136Record, type Rfc2136RecordOptions } from "./dnsRecord.ts";

const good: Rfc2136RecordOptions = {
  name: "www.shop.example.",
  zone: "shop.example.",
  ttlSeconds: 60,
  server: { host: "127.0.0.1", port: 53 },
  keyFile: "/nonexistent/shop.key",
};

describe("Rfc2136Record", () => {
  it("takes a fully qualified name inside its zone and a TTL in seconds", () => {
    const record = new Rfc2136Record(good);
    expect([record.name, record.ttlSeconds]).toEqual(["www.shop.example.", 60]);
  });

  it.each([
    [
      { name: "www.shop.example" },
      'dns.name: "www.shop.example" is not a fully qualified name; end it with a dot',
    ],
    [{ zone: "shop.example" }, 'dns.zone: "shop.example" is not a fully qualified name; end it with a dot'],
    [{ name: "www.other.example." }, 'dns.name: "www.other.example." is not in zone "shop.example."'],
    [{ ttlSeconds: 0 }, "dns.ttlSeconds: 0 is not a whole number of seconds from 1 to 86400"],
    [{ ttlSeconds: 1.5 }, "dns.ttlSeconds: 1.5 is not a whole number of seconds from 1 to 86400"],
  ])("refuses %j, naming the field, the value and the fix", (change, message) => {
    expect(() => new Rfc2136Record({ ...good, ...change })).toThrow(message);
  });
});
