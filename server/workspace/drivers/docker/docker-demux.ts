import type { Readable } from "node:stream";

/** Stream ids of Docker's multiplexed attach protocol (8-byte header: type, 3 zero bytes, uint32 BE size). */
type DockerStreamType = "stdout" | "stderr";

/**
 * A consumer of demultiplexed frames. Returning false asks for backpressure: the source is paused until
 * `resume` is called. docker-modem's `demuxStream` ignores the sinks' backpressure (and re-concatenates
 * its buffer on every chunk), so a slow reader of a large file would make the whole file pile up in
 * memory; this demuxer keeps at most one socket chunk buffered.
 */
export type FrameSink = (type: DockerStreamType, chunk: Buffer) => boolean;

/**
 * Demultiplexes a Docker exec/attach stream (non-TTY) into frames. Resolves when the source ends;
 * rejects on a source error. Call the returned `resume` after a sink returned false and drained.
 */
export function demuxDockerStream(
  source: Readable,
  sink: FrameSink,
): { done: Promise<void>; resume: () => void } {
  let pending: Buffer = Buffer.alloc(0);
  let frameType: DockerStreamType | "stdin" | null = null;
  let frameRemaining = 0;
  let paused = false;

  const process = (data: Buffer) => {
    pending = pending.length === 0 ? data : Buffer.concat([pending, data]);
    let wantsMore = true;
    while (pending.length > 0) {
      if (frameType === null) {
        if (pending.length < 8) break;
        const typeByte = pending.readUInt8(0);
        frameType = typeByte === 2 ? "stderr" : typeByte === 1 ? "stdout" : "stdin";
        frameRemaining = pending.readUInt32BE(4);
        pending = pending.subarray(8);
        continue;
      }
      const take = Math.min(frameRemaining, pending.length);
      const payload = pending.subarray(0, take);
      pending = pending.subarray(take);
      frameRemaining -= take;
      if (payload.length > 0 && frameType !== "stdin") {
        if (!sink(frameType, payload)) wantsMore = false;
      }
      if (frameRemaining === 0) frameType = null;
    }
    // Copy the (small) leftover so the big socket chunk it came from can be collected.
    if (pending.length > 0) pending = Buffer.from(pending);
    if (!wantsMore && !paused) {
      paused = true;
      source.pause();
    }
  };

  const done = new Promise<void>((resolve, reject) => {
    source.on("data", process);
    source.once("end", () => resolve());
    source.once("close", () => resolve());
    source.once("error", reject);
  });
  return {
    done,
    resume: () => {
      if (!paused) return;
      paused = false;
      source.resume();
    },
  };
}
