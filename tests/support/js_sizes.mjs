// The front end's sizes, as the architecture test reads them (tests/test_architecture.py): every module's
// lines and every function's (declarations, expressions, arrows, methods), parsed by TypeScript's parser.
// Usage: node tests/support/js_sizes.mjs FILE...  ->  JSON [{file, lines, functions: [{name, line, lines}]}]
import { readFileSync } from "node:fs";
import ts from "typescript";

const KINDS = new Set([
  ts.SyntaxKind.FunctionDeclaration,
  ts.SyntaxKind.FunctionExpression,
  ts.SyntaxKind.ArrowFunction,
  ts.SyntaxKind.MethodDeclaration,
  ts.SyntaxKind.Constructor,
  ts.SyntaxKind.GetAccessor,
  ts.SyntaxKind.SetAccessor,
]);

function nameOf(node) {
  if (node.name) return node.name.getText();
  const parent = node.parent;
  if (parent && ts.isVariableDeclaration(parent)) return parent.name.getText();
  if (parent && ts.isPropertyAssignment(parent)) return parent.name.getText();
  return "(anonymous)";
}

function sizes(file) {
  const text = readFileSync(file, "utf8");
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.JS);
  const functions = [];
  const line = (position) => source.getLineAndCharacterOfPosition(position).line + 1;
  const visit = (node) => {
    if (KINDS.has(node.kind)) {
      const first = line(node.getStart(source));
      functions.push({ name: nameOf(node), line: first, lines: line(node.getEnd()) - first + 1 });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return { file, lines: text.split("\n").length - (text.endsWith("\n") ? 1 : 0), functions };
}

console.log(JSON.stringify(process.argv.slice(2).map(sizes)));
