// Lint rules of the project (flat config): ESLint's and typescript-eslint's recommended sets, and
// vitest's for the tests. Formatting is prettier's alone (.prettierrc.json, `npm run format`); `npm run lint` and `npm test` check both.
import js from "@eslint/js";
import tseslint from "typescript-eslint";
import vitest from "@vitest/eslint-plugin";

export default tseslint.config(
  {
    ignores: [
      "dist/**",
      "node_modules/**",
      "test-artifacts/**",
      ".hadis/**",
      "bench/results/**",
      "services/dashboard/public/**",
      "test/helpers/otlp-proto/**",
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      ecmaVersion: 2023,
      sourceType: "module",
      globals: {
        process: "readonly",
        console: "readonly",
        Buffer: "readonly",
        URL: "readonly",
        setTimeout: "readonly",
        clearTimeout: "readonly",
        setInterval: "readonly",
        clearInterval: "readonly",
        setImmediate: "readonly",
        performance: "readonly",
        TextEncoder: "readonly",
        TextDecoder: "readonly",
        AbortController: "readonly",
        AbortSignal: "readonly",
        structuredClone: "readonly",
        fetch: "readonly",
        queueMicrotask: "readonly",
        NodeJS: "readonly",
      },
    },
    rules: {
      // An argument or binding named with a leading underscore is unused on purpose (a port's signature).
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_", caughtErrors: "none" }],
      // Prompt sanitizing and terminal output match control and combining characters on purpose.
      "no-control-regex": "off",
      "no-misleading-character-class": "off",
      "@typescript-eslint/no-unused-expressions": ["error", { allowTernary: true, allowShortCircuit: true }],
    },
  },
  {
    files: ["test/**/*.ts"],
    plugins: { vitest },
    rules: {
      ...vitest.configs.recommended.rules,
      "vitest/no-conditional-expect": "error",
      // vitest's expect takes a message as its second argument; hasAssertions() belongs in a beforeEach.
      "vitest/valid-expect": ["error", { maxArgs: 2 }],
      "vitest/no-standalone-expect": ["error", { additionalTestBlockFunctions: ["beforeEach", "beforeAll"] }],
      // Helpers that assert (they fail the test themselves): waiting for a condition, a refusal.
      "vitest/expect-expect": ["error", { assertFunctionNames: ["expect", "expect*", "until", "waitFor", "refused"] }],
    },
  },
);
