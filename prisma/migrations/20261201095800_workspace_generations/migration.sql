-- A purge no longer ends a workspace id for good: it ends a generation. PURGING keeps provisioning out
-- while the purge deletes the machine and data; after PURGED, the next use provisions generation + 1.

-- AlterEnum
ALTER TYPE "WorkspaceState" ADD VALUE 'PURGING' BEFORE 'PURGED';

-- AlterEnum
ALTER TYPE "WorkspaceEventKind" ADD VALUE 'purging' BEFORE 'purged';

-- AlterTable
ALTER TABLE "workspaces" ADD COLUMN "generation" INTEGER NOT NULL DEFAULT 1;
