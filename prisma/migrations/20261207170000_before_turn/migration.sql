-- AlterEnum
ALTER TYPE "CheckpointKind" ADD VALUE 'BEFORE_TURN';
