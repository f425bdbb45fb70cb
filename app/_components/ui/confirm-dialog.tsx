"use client";

import { AlertDialog as AlertDialogPrimitive } from "radix-ui";
import { type ReactNode, useState } from "react";
import { buttonVariants } from "./button-variants";
import { cn } from "./cn";

/**
 * A confirmation for a destructive (or otherwise weighty) action: the trigger opens it, Cancel (focused
 * first, and Escape) backs out, the confirm button runs `onConfirm`. It stays open while `onConfirm`'s
 * promise is pending, so a failure can be shown by the caller where the action lives.
 */
export function ConfirmDialog({
  trigger,
  title,
  description,
  confirmLabel,
  destructive = true,
  onConfirm,
}: {
  trigger: ReactNode;
  title: string;
  description: ReactNode;
  confirmLabel: string;
  destructive?: boolean;
  onConfirm: () => unknown;
}) {
  const [open, setOpen] = useState(false);
  const [busy, setBusy] = useState(false);
  return (
    <AlertDialogPrimitive.Root open={open} onOpenChange={setOpen}>
      <AlertDialogPrimitive.Trigger asChild>{trigger}</AlertDialogPrimitive.Trigger>
      <AlertDialogPrimitive.Portal>
        <AlertDialogPrimitive.Overlay className="data-[state=open]:animate-in data-[state=closed]:animate-out data-[state=closed]:fade-out-0 data-[state=open]:fade-in-0 fixed inset-0 z-50 bg-black/50 backdrop-blur-[2px]" />
        <AlertDialogPrimitive.Content
          data-testid="confirm-dialog"
          className="bg-background data-[state=open]:animate-in data-[state=open]:fade-in-0 data-[state=open]:zoom-in-95 fixed top-1/2 left-1/2 z-50 grid w-[calc(100%-2rem)] max-w-md -translate-x-1/2 -translate-y-1/2 gap-4 rounded-xl border p-6 shadow-lg"
        >
          <div className="flex flex-col gap-2">
            <AlertDialogPrimitive.Title className="text-lg font-semibold">{title}</AlertDialogPrimitive.Title>
            <AlertDialogPrimitive.Description className="text-muted-foreground text-sm whitespace-pre-line">
              {description}
            </AlertDialogPrimitive.Description>
          </div>
          <div className="flex flex-col-reverse gap-2 sm:flex-row sm:justify-end">
            <AlertDialogPrimitive.Cancel className={buttonVariants({ variant: "outline" })}>
              Cancel
            </AlertDialogPrimitive.Cancel>
            <button
              type="button"
              disabled={busy}
              className={cn(buttonVariants({ variant: destructive ? "destructive" : "default" }))}
              onClick={() => {
                setBusy(true);
                void Promise.resolve()
                  .then(onConfirm)
                  .finally(() => {
                    setBusy(false);
                    setOpen(false);
                  });
              }}
            >
              {confirmLabel}
            </button>
          </div>
        </AlertDialogPrimitive.Content>
      </AlertDialogPrimitive.Portal>
    </AlertDialogPrimitive.Root>
  );
}
