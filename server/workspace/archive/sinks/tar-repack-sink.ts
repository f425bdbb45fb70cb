import { Readable } from "node:stream";
import tarStream from "tar-stream";
import { toAppError } from "@/server/shared/errors";
import type { WorkspaceMachine } from "@/server/workspace/drivers/port";
import type { ExtractionSink, FileSink } from "@/server/workspace/archive/sinks/extraction-sink";

const RELAY_BATCH_BYTES = 256 * 1024;

/**
 * Re-packs validated entries as a clean tar (sanitised names and modes, links only as validated) streamed
 * into `backend.putArchive(targetDir)`: the same code serves every backend, because the backend only ever
 * sees the clean tar. A backend failure fails the next call into the sink.
 */
export function createTarRepackSink(machine: WorkspaceMachine, targetDir: string): ExtractionSink {
  const pack = tarStream.pack();
  // Install time, the same for every entry: what the local fast path leaves on its files too.
  const mtime = new Date();
  const abort = new AbortController();
  const putting = machine.putArchive(targetDir, tarBytes(pack));
  const backendFailure = putting.then(
    () => null,
    (error: unknown) => {
      abort.abort(error);
      pack.destroy();
      return toAppError(error);
    },
  );
  // One promise for the whole extraction: racing every drain against it adds no listener per chunk.
  const abortedByBackend = new Promise<never>((_resolve, reject) => {
    abort.signal.addEventListener("abort", () => reject(toAppError(abort.signal.reason)), { once: true });
  });
  abortedByBackend.catch(() => undefined);
  const alive = () => {
    if (abort.signal.aborted) throw toAppError(abort.signal.reason);
  };

  return {
    directory(name) {
      alive();
      pack.entry({ name: `${name}/`, type: "directory", mode: 0o755, mtime });
    },
    file(name, size, executable) {
      alive();
      let sink!: ReturnType<tarStream.Pack["entry"]>;
      const written = new Promise<void>((resolve, reject) => {
        sink = pack.entry({ name, type: "file", size, mode: executable ? 0o755 : 0o644, mtime }, (error) =>
          error ? reject(error) : resolve(),
        );
      });
      written.catch(() => undefined);
      const fileSink: FileSink = {
        write(chunk) {
          if (sink.write(chunk)) return undefined;
          return Promise.race([
            new Promise<void>((resolve) => sink.once("drain", () => resolve())),
            abortedByBackend,
          ]);
        },
        async end() {
          // streamx types require an argument; undefined means "no final chunk".
          sink.end(undefined);
          await Promise.race([written, abortedByBackend]);
        },
      };
      return Promise.resolve(fileSink);
    },
    symlink(name, target) {
      alive();
      pack.entry({ name, type: "symlink", linkname: target, mode: 0o777, mtime });
    },
    hardlink(name, existing) {
      alive();
      pack.entry({ name, type: "link", linkname: existing, mode: 0o644, mtime });
    },
    async finish() {
      pack.finalize();
      const failure = await backendFailure;
      if (failure) throw failure;
    },
    async abort() {
      // Ends the tar stream where it is: the backend's extractor sees EOF and exits, so the caller can
      // safely delete the target directory once this settles.
      pack.destroy();
      await backendFailure;
    },
  };
}

/** tar-stream's pack as a Node byte stream that ends (rather than errors) when the pack is destroyed. */
export function tarBytes(pack: tarStream.Pack): Readable {
  return Readable.from(relay(pack), { objectMode: false });
}

async function* relay(pack: tarStream.Pack): AsyncGenerator<Buffer> {
  // tar-stream emits many small chunks (headers, 16 KiB slices); batching them to ~256 KiB cuts the
  // number of writes into the backend's pipe, which dominates the cost of a large install.
  const batch: Buffer[] = [];
  let batched = 0;
  try {
    for await (const chunk of pack as AsyncIterable<Buffer>) {
      batch.push(chunk);
      batched += chunk.length;
      if (batched >= RELAY_BATCH_BYTES) {
        yield batch.length === 1 ? batch[0]! : Buffer.concat(batch, batched);
        batch.length = 0;
        batched = 0;
      }
    }
    if (batched > 0) yield batch.length === 1 ? batch[0]! : Buffer.concat(batch, batched);
  } catch {
    // Destroyed on purpose after a validation failure: end the stream so the consumer stops cleanly.
  }
}
