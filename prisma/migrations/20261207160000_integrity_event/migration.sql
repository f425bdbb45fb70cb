-- AlterEnum
ALTER TYPE "WorkspaceEventKind" ADD VALUE 'integrity_checked';
