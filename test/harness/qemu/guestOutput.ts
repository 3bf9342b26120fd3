// Finds a test script's output in the guest's serial console log. The guest's /init (written by
// scripts/bootstrap/ipvsGuest.sh) prints these markers around the script; the run id, passed on
// the kernel command line, keeps a script that prints marker-like text from confusing the parse.

export interface GuestOutput {
  output: string;
  exitCode: number;
}

/** The script's output and exit code, or undefined when the end marker never came. `runId` is hex. */
export function extractGuestOutput(serial: string, runId: string): GuestOutput | undefined {
  // The console turns "\n" into "\r\n"; scripts' output is compared as plain text.
  const text = serial.replaceAll("\r\n", "\n");
  const begin = `@@PLB-GUEST-BEGIN ${runId}@@\n`;
  const start = text.indexOf(begin);
  if (start < 0) return undefined;
  const body = text.slice(start + begin.length);
  // No newline needed before the end marker: a script's last line may lack one.
  const end = new RegExp(`@@PLB-GUEST-END ${runId} (\\d+)@@`).exec(body);
  if (!end?.[1]) return undefined;
  return { output: body.slice(0, end.index), exitCode: Number(end[1]) };
}

/** The lines a script printed under `=== name` (its `echo "=== name"`), up to the next such line. */
export function guestSection(output: string, name: string): string[] {
  const lines = output.split("\n");
  const start = lines.indexOf(`=== ${name}`);
  if (start < 0) throw new Error(`no "${name}" section in the guest's output:\n${output}`);
  const end = lines.findIndex((line, i) => i > start && line.startsWith("=== "));
  return lines.slice(start + 1, end < 0 ? undefined : end);
}
