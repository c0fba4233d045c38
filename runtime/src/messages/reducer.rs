//! `add_messages`: how a list of messages takes an update, as LangGraph's reducer does.

use std::collections::{HashMap, HashSet};

use crate::messages::{Message, REMOVE_ALL_MESSAGES};
use crate::{Error, Result};

/// Namespace of the ids `add_messages` gives messages that have none.
const ID_NAMESPACE: uuid::Uuid = uuid::Uuid::from_u128(0x6a1f_3c7e_9b24_4d5a_8e0f_2b7c_5d91_e3a4);

/// Merges `update` into `current` by id: a message with a new id is appended, one with a
/// known id replaces it in place, [`Message::remove`] deletes its id (an unknown id is an
/// error), and [`Message::remove_all`] drops everything before it (the current list and the
/// update's earlier messages). A message without an id gets one.
///
/// The ids given are uuids derived from the message and its position rather than random
/// ones, so folding the same writes again (as loading a thread's delta history does) gives
/// the same ids.
pub fn add_messages(current: &mut Vec<Message>, update: Vec<Message>) -> Result<()> {
    let mut update = update;
    for (i, message) in current.iter_mut().enumerate() {
        if message.id().is_none() {
            message.set_id(Some(fresh_id(i, message)));
        }
    }
    if let Some(last) = update
        .iter()
        .rposition(|m| matches!(m, Message::Remove(r) if r.id == REMOVE_ALL_MESSAGES))
    {
        current.clear();
        update.drain(..=last);
    }
    let mut index: HashMap<String, usize> = current
        .iter()
        .enumerate()
        .filter_map(|(i, m)| m.id().map(|id| (id.to_owned(), i)))
        .collect();
    let mut removed: HashSet<String> = HashSet::new();
    for mut message in update {
        if message.id().is_none() {
            message.set_id(Some(fresh_id(current.len(), &message)));
        }
        let id = message.id().unwrap_or_default().to_owned();
        match (index.get(&id), &message) {
            (Some(_), Message::Remove(_)) => {
                removed.insert(id);
            }
            (Some(&at), _) => {
                removed.remove(&id);
                current[at] = message;
            }
            (None, Message::Remove(_)) => {
                return Err(Error::InvalidUpdate(format!(
                    "attempting to delete a message with an id that doesn't exist (`{id}`)"
                )));
            }
            (None, _) => {
                index.insert(id, current.len());
                current.push(message);
            }
        }
    }
    if !removed.is_empty() {
        current.retain(|m| m.id().is_none_or(|id| !removed.contains(id)));
    }
    Ok(())
}

/// The id of a message without one at `position`: a uuid of its position and its JSON.
fn fresh_id(position: usize, message: &Message) -> String {
    let name = format!("{position}:{}", message.to_json());
    uuid::Uuid::new_v5(&ID_NAMESPACE, name.as_bytes()).to_string()
}
