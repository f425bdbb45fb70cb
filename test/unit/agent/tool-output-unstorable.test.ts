import { describe, expect, it } from "vitest";
import { ZTurnLimits } from "@/server/agent/agent.schema";
import { silentLogger } from "@/server/agent/ports";
import { shapeToolOutput, thrownToolErrorText } from "@/server/agent/tool-output";
import { RecordingOffloader } from "./support";

/**
 * A tool result with characters Postgres cannot store (U+0000, unpaired surrogates) reaches the model with
 * U+FFFD in their place and a note saying so, large (offloaded) or not; a clean one is left as it was.
 */
const shape = (content: string, limits = {}) =>
  shapeToolOutput({
    sessionId: "s1",
    toolCallId: "c1",
    result: { content, isError: false },
    limits: ZTurnLimits.parse(limits),
    offloader: new RecordingOffloader(),
    logger: silentLogger,
  });

describe("a tool result Postgres cannot store as it is", () => {
  it("has NULs and unpaired surrogates replaced, with a note for the model naming both", async () => {
    const shaped = await shape("a\u0000b\u0000 \uD800 \uDC00 ok \uD83D\uDE00");
    expect(shaped.text).toBe(
      "a\uFFFDb\uFFFD \uFFFD \uFFFD ok \uD83D\uDE00\n[Berth: 2 NUL byte(s) replaced with U+FFFD: output is " +
        "binary or contains NUL; 2 unpaired UTF-16 surrogate(s) replaced with U+FFFD]",
    );
  });

  it("keeps the note after an offloaded result's preview, and offloads the replaced text", async () => {
    const offloader = new RecordingOffloader();
    const shaped = await shapeToolOutput({
      sessionId: "s1",
      toolCallId: "c1",
      result: { content: "\u0000".repeat(5_000), isError: false },
      limits: ZTurnLimits.parse({ toolResultOffloadBytes: 1_000, toolResultPreviewChars: 10 }),
      offloader,
      logger: silentLogger,
    });
    expect(shaped.offload).toBeDefined();
    expect(shaped.text).toMatch(/\n\[Berth: 5000 NUL byte\(s\) replaced with U\+FFFD: [^\]]*\]$/);
    expect(offloader.toolResults[0]!.text).toBe("\uFFFD".repeat(5_000));
  });

  it("leaves a clean result alone, and replaces in a thrown tool error too", async () => {
    expect((await shape("plain ✓ 😀")).text).toBe("plain ✓ 😀");
    expect(thrownToolErrorText("Bash", new Error("bad\u0000byte"))).toBe(
      "Error: Bash failed: bad\uFFFDbyte\n[Berth: 1 NUL byte(s) replaced with U+FFFD: output is binary or contains NUL]",
    );
  });
});
