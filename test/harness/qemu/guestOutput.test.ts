// Reading a test script's output out of a serial console log full of other text.
import { extractGuestOutput } from "./guestOutput.ts";

const ID = "0123abcd";
const serialLog = (body: string, end = `@@PLB-GUEST-END ${ID} 3@@\r\n`): string =>
  `SeaBIOS\r\n\x1b[2Jboot noise\r\n@@PLB-GUEST-BEGIN ${ID}@@\r\n${body}${end}[    3.5] reboot: Power down\r\n`;

describe("extractGuestOutput", () => {
  it("returns the text between the markers with plain line ends, and the exit code", () => {
    expect(extractGuestOutput(serialLog("one\r\ntwo\r\n"), ID)).toEqual({
      output: "one\ntwo\n",
      exitCode: 3,
    });
  });

  it("keeps a last line without a newline", () => {
    expect(extractGuestOutput(serialLog("no newline"), ID)).toEqual({ output: "no newline", exitCode: 3 });
  });

  it("ignores markers of another run id, even when the script prints them", () => {
    const body = "@@PLB-GUEST-END ffff 0@@\r\nreal\r\n";
    expect(extractGuestOutput(serialLog(body), ID)).toEqual({
      output: "@@PLB-GUEST-END ffff 0@@\nreal\n",
      exitCode: 3,
    });
    expect(extractGuestOutput(serialLog(body), "ffff")).toBeUndefined();
  });

  it("is undefined when the run never finished", () => {
    expect(extractGuestOutput(serialLog("partial\r\n", ""), ID)).toBeUndefined();
  });
});
