// The device the LB pod's traffic arrives on and leaves by: the default route's (a pod's eth0). The
// fast path's program sits on its ingress and sends the encapsulated packets back out of it.
import { z } from "zod";
import { run, withPrefix } from "../exec.ts";

const defaultRoutes = z.array(z.object({ dev: z.string() }));

export async function uplinkDevice(prefix: string[] = []): Promise<string> {
  const text = await run([...withPrefix(prefix, "ip"), "-j", "-4", "route", "show", "default"]);
  const devices = [...new Set(defaultRoutes.parse(JSON.parse(text || "[]")).map((r) => r.dev))];
  if (devices.length !== 1)
    throw new Error(
      `the pod's uplink is its default route's device, and it has ${devices.length === 0 ? "no default route" : `default routes through ${devices.join(", ")}`}`,
    );
  return devices[0]!;
}
