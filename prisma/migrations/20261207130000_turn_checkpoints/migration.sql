-- CreateEnum
CREATE TYPE "CheckpointStatus" AS ENUM ('READY', 'FAILED');

-- CreateEnum
CREATE TYPE "CheckpointRestoreKind" AS ENUM ('REVERT', 'FORK');

-- CreateEnum
CREATE TYPE "CheckpointRestoreStatus" AS ENUM ('RUNNING', 'DONE', 'FAILED');

-- AlterTable
ALTER TABLE "chat_messages" ADD COLUMN     "turn_id" TEXT;

-- AlterTable
ALTER TABLE "chat_turns" ADD COLUMN     "reverted_at" TIMESTAMP(3);

-- AlterTable
ALTER TABLE "sessions" ADD COLUMN     "forked_from_session_id" TEXT,
ADD COLUMN     "forked_from_turn_id" TEXT;

-- AlterTable
ALTER TABLE "workspaces" ADD COLUMN     "restoring_id" TEXT;

-- CreateTable
CREATE TABLE "workspace_checkpoints" (
    "id" TEXT NOT NULL,
    "tenant_id" TEXT NOT NULL,
    "workspace_id" TEXT NOT NULL,
    "generation" INTEGER NOT NULL,
    "session_id" TEXT,
    "turn_id" TEXT,
    "status" "CheckpointStatus" NOT NULL,
    "root_tree" TEXT,
    "base_tree" TEXT,
    "files" INTEGER NOT NULL DEFAULT 0,
    "total_bytes" BIGINT NOT NULL DEFAULT 0,
    "stored_bytes" BIGINT NOT NULL DEFAULT 0,
    "added" INTEGER NOT NULL DEFAULT 0,
    "changed" INTEGER NOT NULL DEFAULT 0,
    "removed" INTEGER NOT NULL DEFAULT 0,
    "duration_ms" INTEGER NOT NULL DEFAULT 0,
    "error" TEXT,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "workspace_checkpoints_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "checkpoint_restores" (
    "id" TEXT NOT NULL,
    "tenant_id" TEXT NOT NULL,
    "kind" "CheckpointRestoreKind" NOT NULL,
    "checkpoint_id" TEXT NOT NULL,
    "workspace_id" TEXT NOT NULL,
    "session_id" TEXT NOT NULL,
    "status" "CheckpointRestoreStatus" NOT NULL DEFAULT 'RUNNING',
    "written" INTEGER NOT NULL DEFAULT 0,
    "deleted" INTEGER NOT NULL DEFAULT 0,
    "error" TEXT,
    "requested_by" TEXT,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "finished_at" TIMESTAMP(3),

    CONSTRAINT "checkpoint_restores_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "workspace_checkpoints_turn_id_key" ON "workspace_checkpoints"("turn_id");

-- CreateIndex
CREATE INDEX "workspace_checkpoints_tenant_id_workspace_id_generation_cre_idx" ON "workspace_checkpoints"("tenant_id", "workspace_id", "generation", "created_at");

-- CreateIndex
CREATE INDEX "workspace_checkpoints_tenant_id_session_id_created_at_idx" ON "workspace_checkpoints"("tenant_id", "session_id", "created_at");

-- CreateIndex
CREATE INDEX "checkpoint_restores_tenant_id_workspace_id_created_at_idx" ON "checkpoint_restores"("tenant_id", "workspace_id", "created_at");

-- CreateIndex
CREATE INDEX "checkpoint_restores_tenant_id_session_id_created_at_idx" ON "checkpoint_restores"("tenant_id", "session_id", "created_at");

-- AddForeignKey
ALTER TABLE "workspace_checkpoints" ADD CONSTRAINT "workspace_checkpoints_tenant_id_fkey" FOREIGN KEY ("tenant_id") REFERENCES "tenants"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "checkpoint_restores" ADD CONSTRAINT "checkpoint_restores_tenant_id_fkey" FOREIGN KEY ("tenant_id") REFERENCES "tenants"("id") ON DELETE CASCADE ON UPDATE CASCADE;
