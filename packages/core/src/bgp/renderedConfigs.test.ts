// Every renderer's output matches its golden file and loads in the real daemon, for the golden
// examples and for arbitrary valid inputs (few runs: each one starts the daemon's checker).
import fc from "fast-check";
import { join } from "node:path";
import { type CheckResult, checkBirdConfig, checkFrrConfig } from "../testing/daemonCheck.ts";
import { expectGolden } from "../testing/golden.ts";
import { renderRouteReflectorBird } from "./routeReflectorBird.ts";
import {
  arbitraryReflectorInput,
  arbitraryRouterInput,
  arbitrarySpeakerInput,
  reflectorInput,
  reflectorPairInput,
  routerInput,
  routerPairInput,
  speakerDrainingInput,
  speakerExportGatedInput,
  speakerInput,
} from "./testInputs.ts";
import { renderSpeakerBird } from "./speakerBird.ts";
import { renderUpstreamRouterBird } from "./upstreamRouterBird.ts";
import { renderUpstreamRouterFrr } from "./upstreamRouterFrr.ts";

const GOLDEN = join(__dirname, "golden");

interface Renderer<T> {
  render: (input: T) => string;
  check: (config: string) => CheckResult;
  golden: Record<string, T>;
  arbitrary: fc.Arbitrary<T>;
  runs: number;
}

// Type-erased so the three input types share one table; each row is consistent by construction.
const renderer = <T>(r: Renderer<T>) => r as unknown as Renderer<unknown>;

const renderers: Record<string, Renderer<unknown>> = {
  renderSpeakerBird: renderer({
    render: renderSpeakerBird,
    check: checkBirdConfig,
    golden: {
      "speaker.bird.conf": speakerInput,
      "speaker-draining-password.bird.conf": speakerDrainingInput,
      "speaker-export-gated.bird.conf": speakerExportGatedInput,
    },
    arbitrary: arbitrarySpeakerInput,
    runs: 6,
  }),
  renderRouteReflectorBird: renderer({
    render: renderRouteReflectorBird,
    check: checkBirdConfig,
    golden: {
      "routeReflector.bird.conf": reflectorInput,
      "routeReflector-pair-password.bird.conf": reflectorPairInput,
    },
    arbitrary: arbitraryReflectorInput,
    runs: 8,
  }),
  renderUpstreamRouterBird: renderer({
    render: renderUpstreamRouterBird,
    check: checkBirdConfig,
    golden: {
      "upstreamRouter.bird.conf": routerInput,
      "upstreamRouter-pair-password.bird.conf": routerPairInput,
    },
    arbitrary: arbitraryRouterInput(255),
    runs: 6,
  }),
  renderUpstreamRouterFrr: renderer({
    render: renderUpstreamRouterFrr,
    check: checkFrrConfig,
    golden: {
      "upstreamRouter.frr.conf": routerInput,
      "upstreamRouter-pair-password.frr.conf": routerPairInput,
    },
    arbitrary: arbitraryRouterInput(256),
    runs: 6,
  }),
};

describe.each(Object.entries(renderers))("%s", (_name, { render, check, golden, arbitrary, runs }) => {
  it.each(Object.entries(golden))("renders %s, which the daemon accepts", (file, input) => {
    const config = render(input);
    expectGolden(file, config, GOLDEN);
    expect(check(config)).toMatchObject({ accepted: true });
  });

  it("renders configs the daemon accepts for arbitrary valid inputs", () => {
    fc.assert(
      fc.property(arbitrary, (input) => {
        expect(check(render(input))).toMatchObject({ accepted: true });
      }),
      { numRuns: runs },
    );
  });
});
