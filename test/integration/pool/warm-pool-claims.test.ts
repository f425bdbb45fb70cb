/**
 * The warm pool's claim (server/modules/pool/warm-pool.data.ts) under concurrency, on real PostgreSQL: two
 * database clients (two worker processes' pools) claim at once, more claims than machines. Each machine
 * goes to exactly one claim, every other claim answers "empty" at once (no wait), only machines of the
 * asked-for pool and key are taken, and a refill's reservation never overfills a gap two refills race for.
 */
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDatabaseClient, getDb, type Db } from "@/server/db";
import { claimIdleMachine, markMachineIdle, reserveWarmMachines } from "@/server/modules/pool/warm-pool.data";

const MACHINES = 100;
const CLAIMS = 200;

describe("warm pool claims", () => {
  let other: Db;
  const kind = `k${randomBytes(4).toString("hex")}`;

  beforeAll(() => {
    other = createDatabaseClient({ url: process.env.DATABASE_URL ?? "", poolMax: 10 });
  });
  afterAll(async () => {
    await getDb().warmMachine.deleteMany({ where: { backendKind: { startsWith: kind } } });
    await other.$disconnect();
  });

  async function pool(backendKind: string, key: string, size: number): Promise<string[]> {
    let n = 0;
    const ids = await reserveWarmMachines(
      backendKind,
      key,
      size,
      () => `${backendKind}-${key}-${n++}`,
      getDb(),
    );
    for (const id of ids) await markMachineIdle(id, { machine: id }, getDb());
    return ids;
  }

  it(`${CLAIMS} concurrent claims over two clients share ${MACHINES} machines: each taken once, the rest empty`, async () => {
    const ids = await pool(kind, "current", MACHINES);
    // Machines the claims must never take: another key (made before a config change), another backend.
    await pool(kind, "old", 5);
    await pool(`${kind}x`, "current", 5);

    const claims = await Promise.all(
      Array.from({ length: CLAIMS }, (_, i) =>
        claimIdleMachine(kind, "current", `ws-${i}`, i % 2 === 0 ? getDb() : other),
      ),
    );
    const taken = claims.filter((claim) => claim !== null).map((claim) => claim.id);
    expect(taken).toHaveLength(MACHINES);
    expect(new Set(taken).size).toBe(MACHINES);
    expect(new Set(taken)).toEqual(new Set(ids));
    expect(claims.filter((claim) => claim === null)).toHaveLength(CLAIMS - MACHINES);
    // Each claimed row names the one workspace that took it; the other pools are untouched.
    const rows = await getDb().warmMachine.findMany({ where: { backendKind: { startsWith: kind } } });
    const claimed = rows.filter((row) => row.state === "CLAIMED");
    expect(claimed).toHaveLength(MACHINES);
    expect(new Set(claimed.map((row) => row.workspaceId)).size).toBe(MACHINES);
    expect(rows.filter((row) => row.state === "IDLE")).toHaveLength(10);
    expect(claims.find((claim) => claim?.id === ids[0])?.handle).toEqual({ machine: ids[0] });
  });

  it("two refills racing for one gap reserve it once", async () => {
    const backend = `${kind}r`;
    await pool(backend, "current", 3);
    const [first, second] = await Promise.all([
      reserveWarmMachines(
        backend,
        "current",
        8,
        () => `${backend}-a-${randomBytes(4).toString("hex")}`,
        getDb(),
      ),
      reserveWarmMachines(
        backend,
        "current",
        8,
        () => `${backend}-b-${randomBytes(4).toString("hex")}`,
        other,
      ),
    ]);
    expect(first.length + second.length).toBe(5);
    expect(await getDb().warmMachine.count({ where: { backendKind: backend } })).toBe(8);
  });
});
