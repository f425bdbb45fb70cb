import type { Db } from "@/server/db";
import { isAppError } from "@/server/shared/errors";
import { effectiveLimits, tenantLimits, type QuotaDeps } from "./quota.service";
import { quotaExceeded } from "./quota.types";
import { deleteStoredSkills, insertStoredSkillWithin, sumStoredSkillBytes } from "./skill-storage.data";

/**
 * `skillStorageBytes`: the bytes of every skill a tenant uploaded, across its workspaces (0: no cap). An
 * upload's size is known only once it is extracted, so it is installed first, bounded by the room left
 * when it started, then admitted under the tenant's quota row lock: the sum is counted and the skill's row
 * inserted in one transaction, so concurrent uploads on any replica never pass the limit together. A
 * refused skill's folder is removed again (an install always takes a new folder, so nothing older goes).
 */
export type SkillStorageDeps = Pick<QuotaDeps, "config">;

type InstalledSkill = { dir: string; storedBytes: number };

export async function withinSkillStorage<T extends InstalledSkill>(
  target: { tenantId: string; workspaceId: string; partition: string },
  install: (maxExpandedBytes: number | undefined) => Promise<T>,
  remove: (dir: string) => Promise<void>,
  deps: SkillStorageDeps,
  db: Db,
): Promise<T> {
  const { tenantId, workspaceId, partition } = target;
  // Recorded without a cap too, so a cap set later counts what is already stored.
  const limit = (await tenantLimits(tenantId, deps, db)).skillStorageBytes;
  const used = await sumStoredSkillBytes(tenantId, db);
  if (limit > 0 && used >= limit) throw quotaExceeded("skillStorageBytes", limit, used);
  const room = limit > 0 ? limit - used : undefined;
  let installed: T;
  try {
    installed = await install(room);
  } catch (error) {
    // The archive limit it ran under was the quota's room: "expands to more than N bytes" is the quota.
    const details = isAppError(error) ? (error.details as { limitName?: string; limit?: number }) : undefined;
    if (isAppError(error) && error.code === "PAYLOAD_TOO_LARGE" && details?.limitName === "maxExpandedBytes")
      if (room !== undefined && details.limit === room) throw quotaExceeded("skillStorageBytes", limit, used);
    throw error;
  }
  // An identical skill was there already: nothing new is stored.
  if (installed.storedBytes === 0) return installed;
  const admission = await insertStoredSkillWithin(
    tenantId,
    { workspaceId, partition, dir: installed.dir },
    installed.storedBytes,
    (row) => effectiveLimits(row, deps.config.defaults).skillStorageBytes,
    db,
  ).catch(async (error: unknown) => {
    await remove(installed.dir);
    throw error;
  });
  if (!admission.admitted) {
    await remove(installed.dir);
    throw quotaExceeded("skillStorageBytes", admission.limit, admission.used);
  }
  return installed;
}

/** Frees a deleted skill's bytes (`dir`), an agent partition's (agent purge) or a purged workspace's. */
export async function releaseStoredSkills(
  key: {
    workspaceId: string;
    partition?: string;
    dir?: string;
  },
  db: Db,
): Promise<number> {
  return deleteStoredSkills(key, db);
}
