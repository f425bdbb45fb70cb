-- AlterTable
ALTER TABLE "workspace_checkpoints" ADD COLUMN     "mcp_running" TEXT[] DEFAULT ARRAY[]::TEXT[];
