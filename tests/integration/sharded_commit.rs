//! Sharded outputs over a previous set: the commit that replaces it, what a previous index
//! may make tjoin remove (only the set's own shards), links and refusals that leave the
//! folder as it was, and a failure in the middle of the commit rolled back.

use std::fs;
#[cfg(unix)]
use std::path::Path;

use crate::sharded::{copy_set, fixture, run};
use crate::util::{assert_mentions, dir_entries, refused, succeeds};

#[test]
fn a_set_of_one_shard_is_one_file_and_replaces_the_previous_index() {
    let dir = tempfile::tempdir().unwrap();
    let folder = copy_set("model", dir.path(), "ckpt");
    fs::write(folder.join("config.json"), "{}").unwrap();
    let model = fixture("model");
    succeeds(dir.path(), &[model.to_str().unwrap(), "-o", "ckpt/"]);
    assert_eq!(dir_entries(&folder), ["config.json", "model.safetensors"]);
    let single = fs::read(folder.join("model.safetensors")).unwrap();
    assert!(single == fs::read(fixture("expected/model.safetensors")).unwrap());
}

#[test]
fn a_commit_removes_only_the_previous_indexs_stale_shards() {
    let dir = tempfile::tempdir().unwrap();
    let folder = copy_set("model", dir.path(), "ckpt");
    fs::write(folder.join("config.json"), "{}").unwrap();
    fs::write(
        folder.join("model-00009-of-00009.safetensors"),
        "not listed",
    )
    .unwrap();
    // From 4 shards to 2, in the folder it reads: shards 3 and 4 go, the rest stays.
    succeeds(
        dir.path(),
        &["ckpt", "-o", "ckpt", "--max-shard-size", "1KB"],
    );
    assert_eq!(
        dir_entries(&folder),
        [
            "config.json",
            "model-00001-of-00002.safetensors",
            "model-00002-of-00002.safetensors",
            "model-00009-of-00009.safetensors",
            "model.safetensors.index.json",
        ]
    );
    succeeds(dir.path(), &["ckpt", "-o", "back.safetensors"]);
    let back = fs::read(dir.path().join("back.safetensors")).unwrap();
    assert!(back == fs::read(fixture("expected/model.safetensors")).unwrap());
}

/// A folder `ckpt` in `dir` holding the set "model", whose index also lists what a hostile
/// writer would have it remove (returned): files of the user's in and out of the folder,
/// links, folders, paths. Returns the folder and the user's files too.
#[cfg(unix)]
fn hostile_previous_set(dir: &Path) -> (std::path::PathBuf, Vec<std::path::PathBuf>, Vec<String>) {
    use std::os::unix::fs::symlink;
    let folder = copy_set("model", dir, "ckpt");
    let elsewhere = dir.join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    let write = |path: &Path| fs::write(path, format!("{} stays", path.display())).unwrap();
    let user_files = [
        folder.join("config.json"),
        elsewhere.join("model-00009-of-00009.safetensors"),
        elsewhere.join("precious.safetensors"),
        dir.join("x"),
        dir.join("absolute"),
        folder.join("model-00007-of-00009.safetensors/inside"),
        folder.join("tokenizer/vocab.txt"),
    ];
    for file in &user_files {
        fs::create_dir_all(file.parent().unwrap()).unwrap();
        write(file);
    }
    symlink("../elsewhere", folder.join("sub")).unwrap();
    symlink(
        "../elsewhere/precious.safetensors",
        folder.join("model-00008-of-00009.safetensors"),
    )
    .unwrap();
    let hostile = [
        "config.json",
        "sub/model-00009-of-00009.safetensors",
        "../x",
        dir.join("absolute").to_str().unwrap(),
        "model-00007-of-00009.safetensors",
        "tokenizer",
        "model.safetensors.index.json",
        "model-00008-of-00009.safetensors",
    ]
    .map(str::to_string);
    let index = folder.join("model.safetensors.index.json");
    let mut text = fs::read_to_string(&index).unwrap();
    for (at, file) in hostile.iter().enumerate() {
        let entry = format!("\"weight_map\": {{\n    \"hostile.{at}\": {file:?},");
        text = text.replacen("\"weight_map\": {", &entry, 1);
    }
    fs::write(&index, text).unwrap();
    (folder, user_files.to_vec(), hostile.to_vec())
}

/// The dry runs of the write `args` (in `dir`) remove only the previous set's own shards and
/// leave everything `hostile` lists alone, each with its reason.
#[cfg(unix)]
fn check_dry_runs_leave_alone(dir: &Path, args: &[&str], hostile: &[String]) {
    let plan = succeeds(dir, &[&["--dry-run=json"][..], args].concat());
    let plan: serde_json::Value = serde_json::from_slice(&plan).unwrap();
    let removes = plan["shards"]["removes"].as_array().unwrap();
    let previous: Vec<String> = (1..=4)
        .map(|i| format!("ckpt/model-0000{i}-of-00004.safetensors"))
        .collect();
    assert_eq!(removes, &previous, "{plan}");
    let left: Vec<&str> = plan["shards"]["left_alone"]
        .as_array()
        .unwrap()
        .iter()
        .map(|left| {
            assert!(
                left["why"].as_str().is_some_and(|why| !why.is_empty()),
                "{left}"
            );
            left["name"].as_str().unwrap()
        })
        .collect();
    let mut expected: Vec<&str> = hostile.iter().map(String::as_str).collect();
    expected.sort();
    assert_eq!(left, expected);
    let text = String::from_utf8(succeeds(dir, &[&["--dry-run"][..], args].concat()));
    let text = text.unwrap();
    for file in hostile {
        assert_mentions(
            &text,
            &[&format!("leaves {file} alone: the previous index lists it")],
        );
    }
    assert_mentions(
        &text,
        &[
            "../x alone: the previous index lists it, but it is a path",
            "config.json alone: the previous index lists it, but its name is not",
            "00008-of-00009.safetensors alone: the previous index lists it, but it is a symbolic link",
            "00007-of-00009.safetensors alone: the previous index lists it, but it is a folder",
        ],
    );
}

/// A previous index is data whoever wrote to the folder controls: of what it lists, only the
/// set's own shards (regular files in the folder, named like them) go; everything else stays,
/// and the dry run names it with the reason.
#[cfg(unix)]
#[test]
fn a_hostile_previous_index_removes_only_the_sets_own_shards() {
    let dir = tempfile::tempdir().unwrap();
    let (folder, user_files, hostile) = hostile_previous_set(dir.path());
    let model = fixture("model");
    let args = [
        model.to_str().unwrap(),
        "-o",
        "ckpt/",
        "--max-shard-size",
        "1KB",
    ];

    check_dry_runs_leave_alone(dir.path(), &args, &hostile);

    succeeds(dir.path(), &args);
    for file in &user_files {
        let bytes = fs::read_to_string(file).unwrap();
        assert_eq!(bytes, format!("{} stays", file.display()));
    }
    let link = folder.join("model-00008-of-00009.safetensors");
    assert!(link.symlink_metadata().unwrap().file_type().is_symlink());
    assert!(
        folder
            .join("sub")
            .symlink_metadata()
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(
        dir_entries(&folder),
        [
            "config.json",
            "model-00001-of-00002.safetensors",
            "model-00002-of-00002.safetensors",
            "model-00007-of-00009.safetensors",
            "model-00008-of-00009.safetensors",
            "model.safetensors.index.json",
            "sub",
            "tokenizer",
        ]
    );
}

/// A symbolic link named like a file of the new set would have the set's file written
/// outside the folder: refused before anything is written, naming the link and its target.
#[cfg(unix)]
#[test]
fn a_link_named_like_a_file_of_the_new_set_is_refused() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = dir.path().join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    let precious = elsewhere.join("precious.safetensors");
    fs::write(&precious, "someone else's").unwrap();
    let model = fixture("model");
    let model = model.to_str().unwrap();
    for (name, limit) in [
        ("model-00002-of-00002.safetensors", "1KB"),
        ("model.safetensors.index.json", "1KB"),
        ("model.safetensors", "5GB"),
    ] {
        let folder = dir.path().join("ckpt");
        fs::create_dir(&folder).unwrap();
        symlink("../elsewhere/precious.safetensors", folder.join(name)).unwrap();
        let args = [model, "-o", "ckpt/", "--max-shard-size", limit];
        for dry_run in [&[][..], &["--dry-run"]] {
            let stderr = refused(dir.path(), &[dry_run, &args].concat(), 2);
            assert_mentions(
                &stderr,
                &[
                    &format!("ckpt/{name} -> ../elsewhere/precious.safetensors"),
                    "symbolic links named like files of the new set",
                    "hint: remove the links",
                ],
            );
        }
        assert_eq!(dir_entries(&folder), [name]);
        assert_eq!(fs::read(&precious).unwrap(), b"someone else's");
        fs::remove_dir_all(&folder).unwrap();
    }
}

/// A real failure in the middle of the commit: the previous index also lists a stale shard
/// that the user cannot remove, for it is someone else's in a folder with the sticky bit (as
/// /tmp has). Removing it, the commit's last change, fails once the new shards and index have
/// replaced the previous ones, and the rollback must put every one of them back. Only root can
/// give the stale shard to another user, so the test needs root, as CI runs it.
#[cfg(unix)]
#[test]
fn a_failure_in_the_middle_of_the_commit_leaves_the_folder_as_it_was() {
    use std::os::unix::fs::PermissionsExt;
    if !crate::util::as_root() {
        crate::util::cannot_run(
            "only root can make a file that the user running tjoin cannot remove",
        );
        return;
    }
    let chmod = |path: &Path, mode| {
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    };
    // The user `run_unprivileged` runs tjoin as.
    let give_to_nobody = |path: &Path| std::os::unix::fs::chown(path, Some(65534), Some(65534));
    let dir = tempfile::tempdir().unwrap();
    chmod(dir.path(), 0o777);
    // The input, where the user without privileges can read it.
    copy_set("model", dir.path(), "model");
    let folder = copy_set("expected/model_600", dir.path(), "ckpt");
    let stale = "model-00009-of-00009.safetensors";
    let index = folder.join("model.safetensors.index.json");
    let listed = fs::read_to_string(&index).unwrap().replacen(
        "\"weight_map\": {",
        &format!("\"weight_map\": {{\n    \"stale.weight\": \"{stale}\","),
        1,
    );
    fs::write(&index, listed).unwrap();
    for name in dir_entries(&folder) {
        give_to_nobody(&folder.join(name)).unwrap();
    }
    // Root's, in root's folder with the sticky bit: no one else may remove it.
    fs::write(folder.join(stale), "a previous shard").unwrap();
    chmod(&folder, 0o1777);
    let before = snapshot(&folder);
    let args = ["model", "-o", "ckpt/", "--max-shard-size", "400"];
    let output = crate::util::run_unprivileged(dir.path(), &args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert_mentions(&stderr, &["remove", stale]);
    assert!(snapshot(&folder) == before, "the folder changed");
    // Once the shard may be removed, the same run succeeds.
    give_to_nobody(&folder.join(stale)).unwrap();
    let output = crate::util::run_unprivileged(dir.path(), &args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(!folder.join(stale).exists());
    assert!(snapshot(&folder) != before);
}

#[test]
fn a_refused_run_creates_no_folder_and_no_clobber_refuses_any_file_of_the_set() {
    let dir = tempfile::tempdir().unwrap();
    let model = fixture("model");
    let model = model.to_str().unwrap();
    // Refused before anything is written, or failed while writing: no new folder either way.
    let stderr = refused(dir.path(), &[model, "--expect-shape", "1", "-o", "new/"], 2);
    assert_mentions(&stderr, &["not the expected [1]"]);
    let stderr = refused(dir.path(), &[model, "--cast", "int8", "-o", "new/"], 2);
    assert_mentions(&stderr, &["out of the range of int8"]);
    let folder = copy_set("model", dir.path(), "ckpt");
    fs::remove_file(folder.join("model-00001-of-00004.safetensors")).unwrap();
    fs::remove_file(folder.join("model.safetensors.index.json")).unwrap();
    let stderr = refused(
        dir.path(),
        &[model, "-n", "-o", "ckpt/", "--max-shard-size", "400"],
        1,
    );
    assert_mentions(
        &stderr,
        &["model-00002-of-00004.safetensors", "--no-clobber"],
    );
    // Nor may it remove the previous set: a set of one file would replace the 4 shards.
    copy_set("model", dir.path(), "full");
    let stderr = refused(dir.path(), &[model, "-n", "-o", "full/"], 2);
    assert_mentions(
        &stderr,
        &[
            "would remove the previous set's files:",
            "full/model.safetensors.index.json\n",
            "full/model-00004-of-00004.safetensors\n",
        ],
    );
}

#[test]
fn a_single_file_beside_a_new_index_stays_with_a_warning_and_the_plan_lists_removals() {
    let dir = tempfile::tempdir().unwrap();
    let folder = copy_set("model", dir.path(), "ckpt");
    fs::copy(
        fixture("expected/model.safetensors"),
        folder.join("model.safetensors"),
    )
    .unwrap();
    let args = [
        "ckpt/model.safetensors.index.json",
        "-o",
        "ckpt/",
        "--max-shard-size",
        "1KB",
    ];
    let plan = succeeds(dir.path(), &[&["--dry-run=json"][..], &args].concat());
    let plan: serde_json::Value = serde_json::from_slice(&plan).unwrap();
    let removes: Vec<&str> = plan["shards"]["removes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    assert_eq!(
        removes,
        [
            "ckpt/model-00001-of-00004.safetensors",
            "ckpt/model-00002-of-00004.safetensors",
            "ckpt/model-00003-of-00004.safetensors",
            "ckpt/model-00004-of-00004.safetensors",
        ]
    );
    let output = run(dir.path(), &args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_mentions(
        &stderr,
        &["tjoin: warning: ckpt/model.safetensors stays in the folder"],
    );
    assert!(folder.join("model.safetensors").is_file());
    assert!(!folder.join("model-00003-of-00004.safetensors").exists());
}

/// Every file of a folder and of the folders in it, by path, with its bytes.
#[cfg(unix)]
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    for name in dir_entries(dir) {
        let path = dir.join(&name);
        if path.is_dir() {
            let inside = snapshot(&path).into_iter();
            files.extend(inside.map(|(inner, bytes)| (format!("{name}/{inner}"), bytes)));
        } else {
            files.push((name, fs::read(path).unwrap()));
        }
    }
    files
}
