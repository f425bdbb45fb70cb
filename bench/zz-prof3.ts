import fs from "node:fs/promises";
import path from "node:path";
import { randomBytes } from "node:crypto";
import { localMachine, tempDir, writeTree, tarOf, timed, TENANT, bareWalkAndCopy } from "@/bench/checkpoint-support";
import { captureCheckpoint } from "@/server/workspace/checkpoints/capture";
import { FolderCheckpointStore } from "@/server/workspace/checkpoints/checkpoint-store";
import { Session } from "node:inspector/promises";

const n = Number(process.argv[2] ?? 10000);
const root = await tempDir("berth-prof-");
await fs.mkdir(path.join(root, "ws"));
const local = await localMachine(path.join(root, "ws"));
if (typeof local === "string") throw new Error(local);
const host = path.join(root, "host"); await fs.mkdir(host);
const paths = await writeTree(host, n, 256);
await local.machine.putArchive(".", tarOf(host));
const m = local.machine;
const store = new FolderCheckpointStore(path.join(root, "store"));
let prev: string | null = null;
console.log("first", (await timed(async () => { prev = (await captureCheckpoint({ machine: m, store, tenantId: TENANT, previous: null })).root; })).toFixed(0));
const session = new Session(); session.connect();
await session.post("Profiler.enable"); await session.post("Profiler.start");
const caps: number[] = [], bases: number[] = [];
for (let i = 0; i < 8; i++) {
  const ch = paths.slice(i * 3, i * 3 + 3);
  for (const p of ch) await m.writeFile(p, randomBytes(512));
  caps.push(await timed(async () => { prev = (await captureCheckpoint({ machine: m, store, tenantId: TENANT, previous: prev })).root; }));
  bases.push(await bareWalkAndCopy(m, ch, root));
}
const { profile } = await session.post("Profiler.stop");
await fs.writeFile("/tmp/bench-prof/cap.cpuprofile", JSON.stringify(profile));
console.log("caps", caps.map((x) => x.toFixed(0)).join(" "));
console.log("base", bases.map((x) => x.toFixed(0)).join(" "));
await local.close();
await fs.rm(root, { recursive: true, force: true });
