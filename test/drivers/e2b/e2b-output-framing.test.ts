import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { outputDecoder, parseFramingProbe } from "@/server/workspace/drivers/e2b/e2b-output-framing";

function decodeAll(framing: "base64" | "hex" | "text", events: readonly string[]): Buffer {
  const chunks: Buffer[] = [];
  const decoder = outputDecoder(framing, (chunk) => chunks.push(chunk));
  for (const event of events) decoder.push(event);
  decoder.end();
  return Buffer.concat(chunks);
}

/** Cuts `text` at arbitrary places, the way envd's 32 KiB data events cut the relay's lines. */
function cut(text: string, sizes: readonly number[]): string[] {
  const pieces: string[] = [];
  let at = 0;
  for (let i = 0; at < text.length; i++) {
    const size = sizes[i % sizes.length]!;
    pieces.push(text.slice(at, at + size));
    at += size;
  }
  return pieces;
}

describe("E2B output framing (bytes through an SDK that hands out text)", () => {
  it("decodes base64 and hex frames cut anywhere back into the exact bytes", () => {
    const a = randomBytes(1000);
    const b = randomBytes(3);
    const base64 = `b${a.toString("base64")}\nb${b.toString("base64")}\n`;
    const hex = `h${a.toString("hex")}\nh${b.toString("hex")}\n`;
    for (const sizes of [[1], [7, 3], [4096]]) {
      expect(decodeAll("base64", cut(base64, sizes)).equals(Buffer.concat([a, b]))).toBe(true);
      expect(decodeAll("hex", cut(hex, sizes)).equals(Buffer.concat([a, b]))).toBe(true);
    }
  });

  it("keeps a line that is not a frame as text, and the decodable part of a line cut off at the end", () => {
    expect(decodeAll("base64", ["perl: cannot fork\n", "bAAECAw"]).toString("hex")).toBe(
      Buffer.concat([Buffer.from("perl: cannot fork\n"), Buffer.from([0, 1, 2])]).toString("hex"),
    );
    expect(decodeAll("hex", ["hff0"]).toString("hex")).toBe("ff");
  });

  it("text framing re-encodes the SDK's strings; the probe's answer picks the framing", () => {
    expect(decodeAll("text", ["é", "\n"]).toString()).toBe("é\n");
    expect(parseFramingProbe("base64\n")).toBe("base64");
    expect(parseFramingProbe("hex\n")).toBe("hex");
    expect(parseFramingProbe("something else")).toBe("text");
  });
});
