-- CreateEnum
CREATE TYPE "CheckpointKind" AS ENUM ('TURN', 'BEFORE_REVERT');

-- AlterTable
ALTER TABLE "chat_turns" ADD COLUMN     "reverted_by" TEXT;

-- AlterTable
ALTER TABLE "checkpoint_restores" ADD COLUMN     "safety_checkpoint_id" TEXT;

-- AlterTable
ALTER TABLE "workspace_checkpoints" ADD COLUMN     "kind" "CheckpointKind" NOT NULL DEFAULT 'TURN';
