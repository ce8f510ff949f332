//! The job's files: begun once, read strictly, abandoned leaving only what is not its own.

use super::*;

fn manifest(workers: u32) -> Manifest {
    Manifest {
        tjoin_job: LAYOUT,
        tjoin: env!("CARGO_PKG_VERSION").to_string(),
        token: "0123456789abcdef".to_string(),
        workers,
        digest: "d".to_string(),
        inputs: Vec::new(),
        files: vec![JobFile {
            name: "out.npy".to_string(),
            len: 10,
            folder: 0,
        }],
        shares: vec![[0, 10]; workers as usize],
        upload: None,
    }
}

#[test]
fn a_job_is_begun_once_and_abandoned_leaving_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let paths = Paths::of(&dir.path().join("out.npy"), None);
    begin(&paths, &manifest(2)).unwrap();
    assert_eq!(read(&paths).unwrap(), Some(manifest(2)));
    let again = begin(&paths, &manifest(2)).unwrap_err().to_string();
    assert!(again.contains("already recorded"), "{again}");
    let data = open_data(&paths, &manifest(2), 0).unwrap();
    assert_eq!(data.metadata().unwrap().len(), 10);
    assert_eq!(unfinished(&paths, &manifest(2)).unwrap(), [0, 1]);
    // Closed first, as a worker's is once it ends: Windows lists a file removed while
    // open until its last handle closes.
    drop(data);
    abandon(&paths, 2).unwrap();
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn a_manifest_that_names_paths_or_links_is_refused_and_abandon_removes_only_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let paths = Paths::of(&dir.path().join("out.npy"), None);
    let mut hostile = manifest(1);
    hostile.files[0].name = "../victim".to_string();
    fs::write(&paths.manifest, serde_json::to_vec(&hostile).unwrap()).unwrap();
    let error = read(&paths).unwrap_err().to_string();
    assert!(error.contains("not a plain file name"), "{error}");
    // A data file's name made a link to a file the job did not make: left alone, and
    // never opened for writing.
    let victim = dir.path().join("victim");
    fs::write(&victim, b"0123456789").unwrap();
    let good = manifest(1);
    fs::write(&paths.manifest, serde_json::to_vec(&good).unwrap()).unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(&victim, paths.data("out.npy", &good.token)).unwrap();
    #[cfg(unix)]
    assert!(open_data(&paths, &good, 0).is_err());
    abandon(&paths, 1).unwrap();
    #[cfg(unix)]
    assert!(
        paths
            .data("out.npy", &good.token)
            .symlink_metadata()
            .is_ok()
    );
    assert_eq!(fs::read(&victim).unwrap(), b"0123456789");
    assert!(!paths.manifest.exists());
}

#[test]
fn each_data_file_is_in_the_folder_the_manifest_numbers_and_no_other() {
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (dir.path().join("p0"), dir.path().join("p1"));
    fs::create_dir(&first).unwrap();
    fs::create_dir(&second).unwrap();
    let paths = Paths::of(&first, Some(&first)).with_folders([first.clone(), second.clone()]);
    assert_eq!(paths.folders, [first.clone(), second.clone()]);
    let mut job = manifest(1);
    job.files.push(JobFile {
        folder: 1,
        ..job.files[0].clone()
    });
    begin(&paths, &job).unwrap();
    let data = format!(".out.npy.tjoin-job-{}", job.token);
    assert!(first.join(&data).is_file() && second.join(&data).is_file());
    // The first folder's number is left out, so that a join's manifest is as it was.
    let text = fs::read_to_string(&paths.manifest).unwrap();
    assert_eq!(text.matches("\"folder\"").count(), 1, "{text}");
    // A command line that names fewer folders than the manifest numbers: refused.
    let fewer = Paths::of(&first, Some(&first));
    let error = read(&fewer).unwrap_err().to_string();
    assert!(error.contains("in folder 1 of the job"), "{error}");
    abandon(&paths, 1).unwrap();
    assert_eq!(fs::read_dir(&first).unwrap().count(), 0);
    assert_eq!(fs::read_dir(&second).unwrap().count(), 0);
}

#[test]
fn a_staged_record_a_killed_worker_left_is_removed_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let paths = Paths::of(&dir.path().join("out.npy"), None);
    begin(&paths, &manifest(2)).unwrap();
    let record = paths
        .done(1)
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    let staged = dir.path().join(format!("{record}.4242.0123456789abcdef"));
    let other = dir.path().join(format!("{record}.mine"));
    fs::write(&staged, b"{").unwrap();
    fs::write(&other, b"kept").unwrap();
    let abandoned = abandon(&paths, 2).unwrap();
    assert!(abandoned.removed.contains(&staged));
    assert!(!staged.exists() && other.exists());
}

#[test]
fn a_record_counts_only_for_its_own_job_and_share() {
    let dir = tempfile::tempdir().unwrap();
    let paths = Paths::of(&dir.path().join("out.npy"), None);
    let job = manifest(2);
    let mut done = Done {
        tjoin_job: LAYOUT,
        token: job.token.clone(),
        digest: job.digest.clone(),
        worker: 1,
        share: [0, 10],
        etags: Vec::new(),
    };
    record_done(&paths, &done).unwrap();
    assert_eq!(unfinished(&paths, &job).unwrap(), [0]);
    done.digest = "other".to_string();
    record_done(&paths, &done).unwrap();
    assert_eq!(unfinished(&paths, &job).unwrap(), [0, 1]);
}
