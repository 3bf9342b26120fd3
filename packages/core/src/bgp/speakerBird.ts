// BIRD 2 configuration of an LB pod's speaker: the VIPs it serves, announced to the route
// reflectors with the node as next hop. The controller renders it on every change of the announced
// set and reloads BIRD (`birdc configure`), which updates only the routes that changed.
import { birdBfdProtocol, birdPreamble, birdSessionStatements, birdSessions, indent } from "./birdSyntax.ts";
import type { SpeakerConfigInput } from "./types.ts";

export function renderSpeakerBird(input: SpeakerConfigInput): string {
  const vips = [...new Set(input.vips)].sort();
  return [
    ...birdPreamble(
      ["portable-lb LB speaker (BIRD 2). Rendered by the controller: do not edit by hand."],
      input.routerId,
    ),
    "",
    "# The speaker container's output is its log (BIRD logs nowhere else in a container).",
    "log stderr all;",
    "",
    "# The VIPs this pod serves now: added when its data plane has a ready endpoint for them,",
    "# removed (withdrawn) when that stops or the pod drains. Blackhole: BIRD touches no kernel",
    "# table here; the data plane, not this route, carries the traffic.",
    "protocol static vips {",
    ...indent(["ipv4;", ...vips.map((v) => `route ${v}/32 blackhole;`)]),
    "}",
    "",
    ...birdBfdProtocol(input.bfd, true),
    "",
    "template bgp reflector {",
    ...indent([
      `local ${input.routerId} as ${input.asn};`,
      "# The reflectors are reached through the overlay (multihop BFD, like their side).",
      "multihop;",
      ...birdSessionStatements(input),
      "ipv4 {",
      ...indent([
        "# The pod forwards nothing by BGP: it only announces.",
        "import none;",
        'export where proto = "vips";',
        "# The node, not the pod: routers cannot reach pod addresses, and the node agent hands",
        "# VIP traffic arriving at the node to this pod.",
        `next hop address ${input.nextHop};`,
      ]),
      "};",
    ]),
    "}",
    ...birdSessions("reflector", input.routeReflectors),
    "",
  ].join("\n");
}
