/**
 * One process appending to a session's context.jsonl through the Offloader over the local backend (the
 * path every host-folder backend uses). MP_WORKDIR is the workspace folder, MP_TAG this process' tag,
 * MP_COUNT how many messages, MP_BYTES the size of each (well over Node's 512 KiB write chunk).
 * Prints "ready", waits for "go" on stdin (so both processes append at the same time), prints "done".
 */
import { createInterface } from "node:readline";
import { HostFolderMachine } from "@/server/workspace/drivers/host-folder/host-folder-machine";
import { Offloader } from "@/server/workspace/offload/offloader";

const backend = new HostFolderMachine({ workdir: process.env.MP_WORKDIR! });
const offloader = new Offloader(() => backend);
const tag = process.env.MP_TAG!;
const count = Number(process.env.MP_COUNT);
const bytes = Number(process.env.MP_BYTES);

process.stdout.write("ready\n");
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
await lines.next();
// Several appends in flight at once, as concurrent turns of one session in one process would have.
await Promise.all(
  Array.from({ length: count }, (_, index) =>
    offloader.offloadContext("s1", [
      { role: "user", tag, index, content: [{ type: "text", text: tag.repeat(bytes) }] },
    ]),
  ),
);
process.stdout.write("done\n");
process.exit(0);
