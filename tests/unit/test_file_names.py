from headwater.domain.file_names import problem, shown_stack


def test_base_names_with_a_code_ending_are_accepted() -> None:
    for name in ("my-source.mjs", "a.js", "x_1.cts", "Hook.v2.ts"):
        assert problem(name) is None


def test_paths_odd_characters_and_other_endings_are_refused() -> None:
    for name in ("", "../x.mjs", "dir/x.js", "x y.js", "x.json", ".mjs", "x.mjs\n", "a" * 200 + ".js"):
        assert problem(name), name


def test_stacks_name_the_file_in_place_of_the_bundle_entry() -> None:
    stack = ("Error: boom\n    at Object.run (component.js:12:11)\n    at component.ts:3:1\n"
             "    at f (node_modules/x/component.js:4:2)\n    at g (lib/component.js:1:1)")
    assert shown_stack(stack, "my-source.mjs") == (
        "Error: boom\n    at Object.run (my-source.mjs:12:11)\n    at my-source.mjs:3:1\n"
        "    at f (node_modules/x/component.js:4:2)\n    at g (lib/component.js:1:1)")
    assert shown_stack(stack, None) == stack
