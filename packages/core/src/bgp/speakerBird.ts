// BIRD 2 configuration of an LB pod's speaker: the VIPs it serves, announced to the route
// reflectors with the node as next hop. The controller renders it on every change of the announced
// set and reloads BIRD (`birdc configure`), which updates only the routes that changed.
import { BIRD_RUN_FILES } from "../config/lbImage.ts";
import { birdBfdProtocol, birdPreamble, birdSessionStatements, birdSessions, indent } from "./birdSyntax.ts";
import type { SpeakerConfigInput } from "./types.ts";

/**
 * The gate file as a pattern that matches that one name: BIRD accepts a pattern that matches no
 * file (a plain name that does not exist is an error), so the config also loads where no speaker
 * wrote the gate yet (the controller's `bird -p` at the pod's start; the gate then counts as open).
 */
const gatePattern = `${BIRD_RUN_FILES.vipsGate.slice(0, -1)}[${BIRD_RUN_FILES.vipsGate.slice(-1)}]`;

/** `exportTo` (default: every reflector), refused when it names an address that is not one. */
function exportedReflectors(input: SpeakerConfigInput): Set<string> {
  const exportTo = new Set(input.exportTo ?? input.routeReflectors);
  const unknown = [...exportTo].filter((a) => !input.routeReflectors.includes(a));
  if (unknown.length > 0)
    throw new Error(
      `exportTo: ${unknown.join(", ")} is not a route reflector of this speaker; name addresses of routeReflectors (${input.routeReflectors.join(", ")})`,
    );
  return exportTo;
}

export function renderSpeakerBird(input: SpeakerConfigInput): string {
  const vips = [...new Set(input.vips)].sort();
  const exportTo = exportedReflectors(input);
  return [
    ...birdPreamble(
      ["portable-lb LB speaker (BIRD 2). Rendered by the controller: do not edit by hand."],
      input.routerId,
    ),
    "",
    "# The speaker container's output is its log (BIRD logs nowhere else in a container).",
    "log stderr all;",
    "# Since when each session and BFD session is in its state, with the date and zone: the",
    "# controller waits for BFD Up before it exports on a session.",
    'timeformat protocol "%FT%T.%3f%z";',
    "",
    "# The VIPs this pod serves now: added when its data plane has a ready endpoint for them,",
    "# removed (withdrawn) when that stops or the pod drains. Blackhole: BIRD touches no kernel",
    "# table here; the data plane, not this route, carries the traffic.",
    "protocol static vips {",
    ...indent([
      "# The speaker's watchdog writes `disabled yes;` here (and disables this protocol) while the",
      "# controller's announcement lease is expired or revoked, `disabled no;` while it is renewed,",
      "# so a reconfigure keeps its verdict. Include must stand on a line of its own.",
      `include "${gatePattern}";`,
      "ipv4;",
      ...vips.map((v) => `route ${v}/32 blackhole;`),
    ]),
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
    ...birdSessions("reflector", input.routeReflectors, (reflector) =>
      exportTo.has(reflector)
        ? []
        : [
            "# Up, but carrying nothing until the controller can rely on this session (BFD Up):",
            "# a reconfigure changes only the export, the session stays.",
            "ipv4 { export none; };",
          ],
    ),
    "",
  ].join("\n");
}
