// The exercise's TypeScript tests, run from the repository root as the lesson shows:
//   pnpm exec vitest run exercises/multi-head-attention/tests --config vitest.exercise.config.ts
// A failure shows its message (which names the mistake), not a stack into the test file.
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    environment: "node",
    include: ["exercises/**/tests/**/*.test.ts"],
    onStackTrace: () => false,
  },
});
