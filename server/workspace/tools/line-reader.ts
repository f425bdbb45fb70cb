import { StringDecoder } from "node:string_decoder";
import type { Readable } from "node:stream";

export type Line = { text: string; cut: boolean };

/**
 * Splits a byte stream into lines (`\n`, `\r\n` and lone `\r` all end a line), decoding UTF-8 with
 * replacement characters. A line longer than `maxLineChars` keeps only its head (`cut: true`), so one
 * gigantic line never sits in memory. `onLine` returning false stops reading and destroys the stream.
 */
export async function forEachLine(
  stream: Readable,
  maxLineChars: number,
  onLine: (line: Line, index: number) => boolean,
): Promise<void> {
  const decoder = new StringDecoder("utf8");
  let current = "";
  let cut = false;
  let index = 0;
  let pendingCR = false;
  let stopped = false;

  const emit = (): boolean => {
    const keepGoing = onLine({ text: current, cut }, index++);
    current = "";
    cut = false;
    return keepGoing;
  };
  const append = (piece: string) => {
    if (cut || piece.length === 0) return;
    const room = maxLineChars - current.length;
    if (piece.length > room) {
      current += piece.slice(0, room);
      cut = true;
    } else {
      current += piece;
    }
  };
  const consume = (text: string): boolean => {
    let start = 0;
    for (let i = 0; i < text.length; i++) {
      const ch = text.charCodeAt(i);
      if (pendingCR) {
        pendingCR = false;
        if (ch === 10) {
          start = i + 1;
          continue;
        }
      }
      if (ch === 10 || ch === 13) {
        append(text.slice(start, i));
        if (!emit()) return false;
        if (ch === 13) pendingCR = true;
        start = i + 1;
      }
    }
    append(text.slice(start));
    return true;
  };

  for await (const chunk of stream as AsyncIterable<Buffer>) {
    if (!consume(decoder.write(chunk))) {
      stopped = true;
      stream.destroy();
      break;
    }
  }
  if (stopped) return;
  consume(decoder.end());
  // A final line without a terminator is still a line; a trailing newline does not start an empty one.
  if (current.length > 0 || cut) emit();
}
